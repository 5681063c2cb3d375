r"""bsuite's sweeps and its own scores, for runs of its memory experiments.

  python -m repertory.run --agent=r2d2 --lp_launch_type=local_mp \
      --bsuite_sweep=memory_len --logdir=runs/bsuite/r2d2
  python -m repertory.results runs/bsuite --out=docs/results.md

`sweep_points` says what `--bsuite_sweep` runs: every setting of the
experiment's sweep (`bsuite.sweep`: ids `<experiment>/0`, `/1`, ...), each
for the sweep's `NUM_EPISODES` episodes. Its episodes have a fixed length,
so the budget is the actor steps those episodes take (`--max_actor_steps`
of each setting; `episode_steps` says how they are counted).

`frame` turns a finished run's `episodes.csv` (every training episode's
return and length, in the order they ended) into the DataFrame bsuite's
CSV logging wrapper and loader give (`bsuite.utils.wrappers.Logging`,
`bsuite.logging.csv_load`): the logger's columns `steps`, `episode`,
`total_return`, `episode_len`, `episode_return`, the environment's
`bsuite_info()` (`total_perfect`, `total_regret`: a memory chain pays +1
for a correct answer and -1 for a wrong one), `bsuite_id`, `results_dir`,
and the sweep's settings joined by bsuite's `join_metadata`. It has a row
per episode (bsuite's `log_every`); bsuite's score reads the row of its
`NUM_EPISODES`-th episode, or of the last one when fewer were played.
`score` is bsuite's own `bsuite.experiments.<experiment>.analysis.score`.
"""

import contextlib
import importlib
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

# bsuite experiments whose runs this module sweeps and scores: the memory
# chains (their scoring info follows from each episode's return).
EXPERIMENTS = ('memory_len', 'memory_size')
EPISODES_FILE = 'episodes.csv'
# The columns of bsuite's logging wrapper, then the memory chain's info.
LOGGER_COLUMNS = ('steps', 'episode', 'total_return', 'episode_len',
                  'episode_return', 'total_perfect', 'total_regret')


class BsuiteError(ValueError):
  """A bsuite sweep that cannot be run or scored; the message is one line."""


def bsuite_id(env: Any) -> Optional[str]:
  """'bsuite:memory_len/3' -> 'memory_len/3' for an experiment of
  `EXPERIMENTS`; None for any other environment."""
  if not isinstance(env, str) or not env.startswith('bsuite:'):
    return None
  found = env[len('bsuite:'):]
  return found if found.split('/')[0] in EXPERIMENTS else None


def sweep_ids(spec: str) -> List[str]:
  """The bsuite ids of `--bsuite_sweep=<spec>`: an experiment's whole sweep
  ('memory_len') or ids of it ('memory_len/0,memory_len/4')."""
  from bsuite import sweep  # pylint: disable=g-import-not-at-top
  ids = []
  for part in (p.strip() for p in spec.split(',') if p.strip()):
    experiment = part.split('/')[0]
    if experiment not in EXPERIMENTS:
      raise BsuiteError(f'--bsuite_sweep={spec}: {experiment!r} is not one of '
                        f'{", ".join(EXPERIMENTS)} (the bsuite experiments '
                        'repertory scores).')
    if '/' not in part:
      ids += [i for i in sweep.SETTINGS if i.split('/')[0] == part]
    elif part in sweep.SETTINGS:
      ids.append(part)
    else:
      raise BsuiteError(f'--bsuite_sweep={spec}: bsuite has no id {part!r} '
                        f'({experiment}/0 to {experiment}/'
                        f'{_count(experiment) - 1}).')
  if not ids:
    raise BsuiteError(f'--bsuite_sweep={spec!r}: name an experiment '
                      f'({", ".join(EXPERIMENTS)}) or ids of one.')
  return list(dict.fromkeys(ids))


def num_episodes(experiment: str) -> int:
  """The episodes bsuite's sweep plays of each setting of `experiment`."""
  return importlib.import_module(
      f'bsuite.experiments.{experiment}.sweep').NUM_EPISODES


def episode_steps(setting: str) -> int:
  """The actor steps of one episode of bsuite id `setting` (fixed for the
  memory chains; one episode played): its transitions and the step that
  starts the next episode, which the actor-critic agents' actors count too
  (stepping a dm_env environment after its last step resets it). Ape-X's
  and R2D2's actors count transitions only, so a budget of N such episodes
  plays N * (length + 1) / length of theirs; bsuite's score reads the
  row of its N-th episode either way."""
  from repertory import environments  # pylint: disable=g-import-not-at-top
  with contextlib.closing(environments.make(f'bsuite:{setting}',
                                            seed=0)) as env:
    timestep, steps = env.reset(), 0
    while not timestep.last():
      timestep, steps = env.step(0), steps + 1
  return steps + 1


def sweep_points(spec: str, episodes: Optional[int] = None
                 ) -> List[Tuple[str, Dict[str, str]]]:
  """(label, flags) of each setting of `--bsuite_sweep=<spec>`: its
  environment and, as the budget, the steps of `episodes` episodes (default:
  the sweep's `NUM_EPISODES`), played to the end (`stop_at_return=never`);
  label `<experiment>-<n>` as bsuite names its files."""
  if episodes is not None and episodes < 1:
    raise BsuiteError(f'--bsuite_episodes={episodes} must be >= 1.')
  points = []
  for setting in sweep_ids(spec):
    count = episodes or num_episodes(setting.split('/')[0])
    points.append((setting.replace('/', '-'), {
        'env': f'bsuite:{setting}',
        'max_actor_steps': str(count * episode_steps(setting)),
        'stop_at_return': 'never'}))
  return points


def frame(run_dir: str, setting: str) -> Any:
  """The DataFrame bsuite's CSV logger (every episode) and loader give for
  the training episodes of the run in `run_dir` on bsuite id `setting`."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  from bsuite.logging import logging_utils  # pylint: disable=g-import-not-at-top
  path = os.path.join(run_dir, EPISODES_FILE)
  try:
    episodes = pd.read_csv(path)
  except (OSError, ValueError) as e:
    raise BsuiteError(f'Cannot read {path}: {e}.') from None
  returns = episodes['return'].to_numpy(np.float64)
  lengths = episodes['length'].to_numpy(np.int64)
  df = pd.DataFrame({
      'steps': np.cumsum(lengths),
      'episode': np.arange(1, len(returns) + 1),
      'total_return': np.cumsum(returns),
      'episode_len': lengths,
      'episode_return': returns,
      'total_perfect': np.cumsum(returns > 0),
      'total_regret': np.cumsum(np.where(returns < 0, 2.0, 0.0)),
  })
  df['bsuite_id'] = setting
  df['results_dir'] = run_dir
  return logging_utils.join_metadata(df)


def score(frames: Sequence[Any]) -> float:
  """bsuite's score of its experiment from the frames of its settings (all
  of one experiment and one run of each setting)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  df = pd.concat(list(frames), sort=False)
  experiments = sorted(set(df['bsuite_env']))
  if len(experiments) != 1:
    raise BsuiteError(f'score: frames of several experiments {experiments}.')
  analysis = importlib.import_module(
      f'bsuite.experiments.{experiments[0]}.analysis')
  return float(analysis.score(df))


def _count(experiment: str) -> int:
  return len(importlib.import_module(
      f'bsuite.experiments.{experiment}.sweep').SETTINGS)


_EXPLANATION = """\
Runs of bsuite's memory experiments (`--env=bsuite:memory_len/<n>`, one run
directory per setting; `--bsuite_sweep` runs them all), scored by bsuite's own
analysis (`bsuite.experiments.<experiment>.analysis.score`) on the training
episodes of each run (`episodes.csv`, converted to the rows bsuite's CSV logger
writes). An agent has learned a setting when, over the first `NUM_EPISODES`
episodes (bsuite's 10,000; the episodes played when fewer), it answered
correctly often enough that bsuite's regret ratio, 2 × (1 − correct share),
stays below 0.75 (more than 62.5% correct; chance is 50%). The **memory score**
is the share of settings learned, from 0 to 1; per seed, then the mean over
seeds with its 95% Student-t interval. An agent without memory (Ape-X) can
answer only `memory_len/0`, whose one step shows the bit and the question
together (1 of its 23 settings).
"""


def section(groups: Sequence[Any]) -> List[str]:
  """The page's bsuite section for the runs of `groups` on the experiments
  of `EXPERIMENTS` (none: no lines)."""
  from repertory.results import page  # pylint: disable=g-import-not-at-top
  sweeps = _sweep_groups(groups)
  if not sweeps:
    return []
  lines = ['', '## bsuite', '', _EXPLANATION]
  for experiment in sorted({s.env for s in sweeps}):
    mine = [s for s in sweeps if s.env == experiment]
    lines += [f'### `{experiment}`', '',
              '| agent | seeds | settings | episodes scored per setting '
              '| memory score |', '|---|---|---|---|---|']
    by_setting: Dict[str, Dict[str, List[Tuple[float, float]]]] = {}
    for sweep in mine:
      scores, settings, scored = [], [], []
      for seed_runs in _by_seed(sweep.runs).values():
        frames = {bsuite_id(r.config['experiment']['env']):
                  frame(r.path, bsuite_id(r.config['experiment']['env']))
                  for r in seed_runs}
        scores.append(score(list(frames.values())))
        settings.append(len(frames))
        scored += [_scored_episodes(df) for df in frames.values()]
        for setting, df in frames.items():
          by_setting.setdefault(setting, {}).setdefault(
              sweep.name, []).append((_correct(df), score([df])))
      total = _count(experiment.split(':')[1])
      lines.append(f'| {sweep.name} | {len(scores)} | '
                   f'{"/".join(map(str, sorted(set(settings))))} of {total} | '
                   f'{_span(scored)} | {page.score_cell(scores)} |')
    lines += _per_setting(by_setting, [s.name for s in mine])
    lines += _commands(mine)
  return lines


def _sweep_groups(groups: Sequence[Any]) -> List[Any]:
  """The runs of `groups` on bsuite's memory settings, one group per agent,
  config and experiment (`env`: 'bsuite:<experiment>')."""
  import json  # pylint: disable=g-import-not-at-top
  from repertory.results import runs as runs_lib  # pylint: disable=g-import-not-at-top
  out: Dict[Tuple[str, str], Any] = {}
  for group in groups:
    setting = bsuite_id(group.env)
    if setting is None:
      continue
    shared = json.loads(group.key)
    for name in ('env', 'max_actor_steps'):
      shared['experiment'].pop(name, None)
    key = json.dumps(shared, sort_keys=True)
    env = 'bsuite:' + setting.split('/')[0]
    if (env, key) not in out:
      out[(env, key)] = runs_lib.Group(group.agent, env, key, [])
    out[(env, key)].runs.extend(group.runs)
  sweeps = sorted(out.values(), key=lambda g: (g.env, g.agent, g.key))
  runs_lib.name_variants(sweeps)
  return sweeps


def _by_seed(runs: Sequence[Any]) -> Dict[int, List[Any]]:
  out: Dict[int, List[Any]] = {}
  for run in runs:
    out.setdefault(run.seed, []).append(run)
  return dict(sorted(out.items()))


def _scored_episodes(df: Any) -> int:
  """The episodes bsuite's score reads: its NUM_EPISODES, or all played
  when fewer."""
  return min(int(df['episode'].max()),
             num_episodes(df['bsuite_env'].iloc[0]))


def _span(values: Sequence[int]) -> str:
  low, high = min(values), max(values)
  return f'{low:,}' if low == high else f'{low:,}–{high:,}'


def _correct(df: Any) -> float:
  """The share of correct answers over the episodes bsuite scores."""
  last = _scored_episodes(df)
  row = df[df['episode'] == last].iloc[0]
  return float(row['total_perfect']) / last


def _per_setting(by_setting: Dict[str, Dict[str, List[Tuple[float, float]]]],
                 names: Sequence[str]) -> List[str]:
  """A row per setting: each agent's share of correct episodes (mean over
  seeds) and in how many seeds bsuite counts the setting learned."""
  from bsuite import sweep  # pylint: disable=g-import-not-at-top
  ordered = sorted(by_setting, key=lambda s: int(s.split('/')[1]))
  parameter = ', '.join(sweep.SETTINGS[ordered[0]])
  lines = ['', f'Per setting: correct episodes (mean over seeds) and the '
           'seeds bsuite counts as learned.', '',
           f'| setting | {parameter} | ' + ' | '.join(names) + ' |',
           '|---|---|' + '---|' * len(names)]
  for setting in ordered:
    cells = []
    for name in names:
      values = by_setting[setting].get(name)
      if not values:
        cells.append('—')
        continue
      correct = 100 * float(np.mean([c for c, _ in values]))
      learned = sum(int(s) for _, s in values)
      cells.append(f'{correct:.1f}% ({learned}/{len(values)} learned)')
    value = ', '.join(str(v) for v in sweep.SETTINGS[setting].values())
    lines.append(f'| `{setting}` | {value} | ' + ' | '.join(cells) + ' |')
  return lines


def _commands(sweeps: Sequence[Any]) -> List[str]:
  """The sweeps' command lines, from `sweep.json` above the run
  directories."""
  # pylint: disable=g-import-not-at-top
  from repertory import rundir
  from repertory import sweep as sweep_lib
  # pylint: enable=g-import-not-at-top
  found = []
  for sweep in sweeps:
    for run in sweep.runs:
      path = sweep_lib.sweep_file_of(run.path)
      if os.path.exists(path):
        for command in rundir.read_json(path).get('commands', []):
          if command not in found:
            found.append(command)
  if not found:
    return ['', 'Sweep commands: not recorded (each run\'s own command is in '
            'its task\'s section below).']
  return ['', 'Sweep commands:', '', '```sh', *found, '```']
