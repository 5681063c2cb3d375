"""Finding and reading run directories and grouping them over seeds."""

import dataclasses
import datetime
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from repertory import plot
from repertory import rundir

# Published scores (MinAtar paper, Young & Tian 2019: the best of its DQN and
# AC(lambda) baselines at 5M frames, as a 100-episode moving average of
# training returns, read off its learning curves), by MinAtar game.
MINATAR_REFERENCES = {
    'asterix': 20.0,
    'breakout': 17.5,
    'freeway': 50.0,
    'seaquest': 20.0,
    'space_invaders': 185.0,
}
MINATAR_SOURCE = (
    'Young & Tian (2019), *MinAtar: An Atari-Inspired Testbed for Thorough '
    'and Reproducible Reinforcement Learning Experiments*: the best of its '
    'DQN and AC(λ) baselines at 5M frames, as a 100-episode moving average '
    'of training returns, read off its learning curves')
_MINATAR_GAME = re.compile(r'^minatar:([a-z_]+)')

# Settings that differ between the seeds of one group.
PER_SEED = ('seed', 'logdir')


class ResultsError(ValueError):
  """Bad input to the results page; the message is one line."""


def task_order(env: str) -> Tuple[Any, ...]:
  """A sort key of task names with their numbers in numeric order
  (`bsuite:memory_len/2` before `/10`)."""
  return tuple(int(part) if part.isdigit() else part
               for part in re.split(r'(\d+)', env))


def reference(env: str) -> Optional[float]:
  """The published score of task `env`, if the module knows one."""
  match = _MINATAR_GAME.match(env)
  return MINATAR_REFERENCES.get(match.group(1)) if match else None


@dataclasses.dataclass
class Run:
  """One finished run directory, as the page shows it."""
  path: str  # As given on the command line (joined with the part found).
  config: Dict[str, Any]
  results: Dict[str, Any]
  attempts: List[Dict[str, Any]]
  curves: Dict[str, Tuple[np.ndarray, np.ndarray]]  # metric -> (steps, y)

  @property
  def seed(self) -> int:
    return int(self.config['experiment'].get('seed', 0))

  @property
  def commands(self) -> List[str]:
    """The command line of each attempt (several if it was resumed)."""
    return [rundir.command_line(a['argv'], a.get('environment'))
            for a in self.attempts if a.get('argv')]

  @property
  def wall_seconds(self) -> Optional[float]:
    """From each attempt's start to its end, summed (None if unrecorded)."""
    total = None
    for attempt in self.attempts:
      if attempt.get('started') and attempt.get('ended'):
        seconds = (_time(attempt['ended']) - _time(attempt['started'])
                   ).total_seconds()
        total = (total or 0.0) + seconds
    return total


@dataclasses.dataclass
class Group:
  """The runs of one agent on one task with one config, over seeds."""
  agent: str
  env: str
  key: str  # The config without its per-seed settings, as JSON.
  runs: List[Run]
  variant: str = ''  # How the config differs from its agent's others.

  @property
  def name(self) -> str:
    return f'{self.agent} {self.variant}'.strip()

  def values(self, key: str) -> List[float]:
    """`results.json[key]` of each run that has it (a number)."""
    out = []
    for run in self.runs:
      value = run.results.get(key)
      if isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(float(value))
    return out


def find_runs(paths: Sequence[str]) -> Tuple[List[str], List[str]]:
  """(finished, unfinished) run directories at or below `paths`, sorted.

  A run directory holds a `config.json` of `python -m repertory.run`; the
  search does not descend into one. Raises `ResultsError` for a path that
  does not exist or when none is found.
  """
  finished, unfinished = [], []
  for path in paths:
    if not os.path.exists(path):
      raise ResultsError(f'{path} does not exist; pass run directories (the '
                         '--logdir of python -m repertory.run) or folders '
                         'holding them.')
    if not os.path.isdir(path):
      raise ResultsError(f'{path} is not a directory; pass run directories '
                         'or folders holding them.')
    for root, dirs, files in os.walk(path):
      dirs.sort()
      if rundir.CONFIG not in files:
        continue
      dirs[:] = []  # attempts/<n>/config.json is not another run.
      if rundir.check_run_files(root) is None:
        continue
      (finished if rundir.finished(root) else unfinished).append(
          os.path.normpath(root))
  if not finished:
    more = f' ({len(unfinished)} without results.json)' if unfinished else ''
    raise ResultsError(f'No finished run directories{more} under '
                       f'{", ".join(paths)}: pass the --logdir of python -m '
                       'repertory.run runs, or folders holding them.')
  return sorted(set(finished)), sorted(set(unfinished))


def read_run(path: str) -> Run:
  """Reads a finished run directory (see `find_runs`)."""
  config = rundir.check_run_files(path)
  results = rundir.read_json(rundir.finished(path)[0])
  attempts = [
      rundir.read_json(os.path.join(path, rundir.ATTEMPTS, str(n),
                                    rundir.ATTEMPT))
      for n in rundir.attempts(path)]
  curves = {}
  if os.path.exists(os.path.join(path, plot.PROGRESS_FILE)):
    for metric in ('eval_return_mean', 'episode_return_mean'):
      columns = plot.read_progress(path, metric)
      if metric in columns:
        curves[metric] = (columns['actor_steps'], columns[metric])
  return Run(path, config, results, attempts, curves)


def group_runs(runs: Sequence[Run]) -> List[Group]:
  """Groups runs by agent, environment and config (all but the seed and the
  run directory), ordered by task, agent and config; runs by seed."""
  groups: Dict[str, Group] = {}
  for run in runs:
    experiment = run.config['experiment']
    shared = {'agent': run.config['agent'],
              'experiment': {k: v for k, v in experiment.items()
                             if k not in PER_SEED}}
    key = json.dumps(shared, sort_keys=True, default=str)
    if key not in groups:
      groups[key] = Group(str(experiment['agent']), str(experiment['env']),
                          key, [])
    groups[key].runs.append(run)
  ordered = sorted(groups.values(),
                   key=lambda g: (task_order(g.env), g.agent, g.key))
  for group in ordered:
    group.runs.sort(key=lambda r: (r.seed, r.path))
  name_variants(ordered)
  return ordered


def name_variants(groups: Sequence[Group]) -> None:
  """Sets `variant` of groups that share agent and task to the settings in
  which their configs differ."""
  by_task: Dict[Tuple[str, str], List[Group]] = {}
  for group in groups:
    by_task.setdefault((group.env, group.agent), []).append(group)
  for same in by_task.values():
    if len(same) < 2:
      continue
    flat = [_flatten(json.loads(g.key)) for g in same]
    names = sorted({k for f in flat for k in f
                    if len({json.dumps(x.get(k), default=str)
                            for x in flat}) > 1})
    for group, values in zip(same, flat):
      group.variant = '(' + ', '.join(
          f'{_flag(n)}={values.get(n, "—")}' for n in names) + ')'


def _flag(name: str) -> str:
  """'agent.x' -> 'config.x', 'experiment.x' -> 'x': the flag's name."""
  scope, _, field = name.partition('.')
  return {'agent': f'config.{field}', 'experiment': field}.get(scope, name)


def _flatten(config: Dict[str, Any], prefix: str = '') -> Dict[str, Any]:
  out = {}
  for key, value in config.items():
    if isinstance(value, dict):
      out.update(_flatten(value, f'{prefix}{key}.'))
    else:
      out[f'{prefix}{key}'] = value
  return out


def _time(text: str) -> datetime.datetime:
  return datetime.datetime.strptime(text, '%Y-%m-%dT%H:%M:%S%z')
