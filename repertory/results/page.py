"""The results page as Markdown: a header saying how it was made, one table
row per agent x task, the published references, bsuite's scores of runs
of its memory experiments (`bsuite.section`), then per task its figure and
per agent the seeds, their figures and their exact commands."""

import math
from typing import Dict, List, Optional, Sequence, Tuple

from repertory.components import statistics
from repertory.results import bsuite
from repertory.results import figures
from repertory.results import runs as runs_lib

SCORE = 'eval_return_mean'
TRAINING = 'episode_return_mean'

_EXPLANATION = """\
Every row is one agent on one task: the finished runs with the same agent,
environment and settings, over their seeds (`--seed`). Columns:

- **final evaluation**: `eval_return_mean` of each run's `results.json`, the
  mean return of the greedy evaluation of the final weights
  (`--eval_episodes` episodes); the mean over seeds and, in brackets, its 95%
  Student-t interval, mean ± t(0.975, n−1)·s/√n with s the standard
  deviation over the n seeds (none for one seed).
- **training return**: `episode_return_mean` of `results.json`, the mean
  return of the last 100 training episodes (with the actors' exploration);
  the same statistics. The published references are of this kind.
- **reference**: a published score of the task, where one is known (see
  References).
- **frames**: actor steps (environment steps) when the final evaluation ran,
  the mean over seeds.
- **wall time**: seconds from the start of each run (its flags checked) to its
  end, summed over its attempts (`attempts/<n>/attempt.json`), the mean over
  seeds; the machine's cores, load average and processor when each run
  started are in its task's section.
"""

_DOCUMENTED = """\
- **documented command**: the page of the docs whose `python -m
  repertory.run` command every run of the row ran: the same flags and
  values, but for `--seed`, `--logdir` and the game (`minatar:breakout`
  stands for every MinAtar game).
"""


def number(value: Optional[float]) -> str:
  """A score as the page writes it: 2 decimals, 1 from 100 up."""
  if value is None or not math.isfinite(value):
    return '—'
  text = f'{value:.1f}' if abs(value) >= 100 else f'{value:.2f}'
  return '0.00' if text in ('-0.00', '-0.0') else text


def score_cell(values: Sequence[float]) -> str:
  """'mean [low, high]' over seeds ('mean (1 seed)' for one)."""
  if not values:
    return '—'
  mean, low, high = statistics.mean_interval(values)
  if len(values) < 2:
    return f'{number(mean)} (1 seed)'
  return f'{number(mean)} [{number(low)}, {number(high)}]'


def anchor(group: runs_lib.Group, index: int) -> str:
  """The id of a group's section ('catch-impala', '-2' for a variant)."""
  base = figures.slug(f'{group.env}-{group.agent}')
  return base if not group.variant else f'{base}-{index}'


def render(groups: Sequence[runs_lib.Group], unfinished: Sequence[str],
           command: str, figure_links: Dict[str, str],
           documented: Optional[Dict[int, Tuple[str, str]]] = None) -> str:
  """The whole page. `figure_links`: task -> its PNG, relative to the page;
  `documented` (if given, a column): id(group) -> (the docs page whose
  command the group ran, its link relative to the page)."""
  anchors = _anchors(groups)
  extra = documented is not None
  lines = ['# Results', '',
           'Generated from run directories by', '', '```sh', command, '```',
           '', 'Rerun it to update this page; the same run directories give '
           'the same page and figures.', '',
           _EXPLANATION + (_DOCUMENTED if extra else ''),
           '| task | agent | seeds | final evaluation | training return '
           '| reference | frames | wall time (s) |'
           + (' documented command |' if extra else ''),
           '|---|---|---|---|---|---|---|---|' + ('---|' if extra else '')]
  for group in groups:
    frames = group.values('actor_steps')
    walls = [w for w in (r.wall_seconds for r in group.runs) if w is not None]
    reference = runs_lib.reference(group.env)
    cells = [
        f'| `{group.env}`', f'[{group.name}](#{anchors[id(group)]})',
        str(len(group.runs)), score_cell(group.values(SCORE)),
        score_cell(group.values(TRAINING)), number(reference),
        f'{round(sum(frames) / len(frames)):,}' if frames else '—',
        f'{sum(walls) / len(walls):.0f}' if walls else '—']
    if extra:
      cells.append(_documented_cell(documented.get(id(group))))
    lines.append(' | '.join(cells) + ' |')
  lines += _references(groups)
  lines += bsuite.section(groups)
  for env in sorted({g.env for g in groups}, key=runs_lib.task_order):
    lines += ['', f'## `{env}`', '',
              f'![Learning curves on {env}]({figure_links[env]})', '']
    lines.append('Left: the greedy evaluations during training and of the '
                 'final weights; right: the mean return of the last 100 '
                 'training episodes. Thin lines: seeds (dots: measured '
                 'points); thick: their mean, '
                 'shaded between the lowest and highest seed over the steps '
                 'every seed reached.')
    for group in groups:
      if group.env == env:
        lines += _section(group, anchors[id(group)],
                          (documented or {}).get(id(group)))
  if unfinished:
    lines += ['', '## Left out', '',
              'Run directories without results of their latest attempt '
              '(running, stopped or failed):', '']
    lines += [f'- `{path}`' for path in unfinished]
  return '\n'.join(lines) + '\n'


def _anchors(groups: Sequence[runs_lib.Group]) -> Dict[int, str]:
  out, count = {}, {}
  for group in groups:
    key = (group.env, group.agent)
    count[key] = count.get(key, 0) + 1
    out[id(group)] = anchor(group, count[key])
  return out


def _references(groups: Sequence[runs_lib.Group]) -> List[str]:
  known = sorted({g.env for g in groups
                  if runs_lib.reference(g.env) is not None},
                 key=runs_lib.task_order)
  lines = ['', '## References', '']
  if not known:
    return lines + ['No task on this page has a published reference in '
                    '`repertory/results/runs.py` (the MinAtar games have).']
  lines += ['| task | published score |', '|---|---|']
  lines += [f'| `{env}` | {number(runs_lib.reference(env))} |'
            for env in known]
  return lines + ['', f'Source: {runs_lib.MINATAR_SOURCE}.']


def _documented_cell(page: Optional[Tuple[str, str]]) -> str:
  return f'[{page[0]}]({page[1]})' if page else '—'


def _section(group: runs_lib.Group, anchor_id: str,
             page: Optional[Tuple[str, str]] = None) -> List[str]:
  lines = ['', f'<a id="{anchor_id}"></a>', '',
           f'### {group.name} on `{group.env}`', '']
  if page:
    lines += [f'These runs ran the command documented in '
              f'{_documented_cell(page)}.', '']
  lines += ['| seed | run directory | final evaluation | training return '
            '| frames | wall time (s) | started | cores, load average; '
            'processor |',
            '|---|---|---|---|---|---|---|---|']
  for run in group.runs:
    first = run.attempts[0] if run.attempts else {}
    load = first.get('load_average')
    machine = (f'{first.get("cpus", "—")}, {load[0]:.2f}'
               if isinstance(load, list) and load else '—')
    if first.get('processor'):  # Machines of one kind differ in it.
      machine += f'; {first["processor"]}'
    wall = run.wall_seconds
    steps = run.results.get('actor_steps')
    lines.append(' | '.join([
        f'| {run.seed}', f'`{run.path}`',
        number(_float(run.results.get(SCORE))),
        number(_float(run.results.get(TRAINING))),
        f'{int(steps):,}' if isinstance(steps, (int, float)) else '—',
        f'{wall:.0f}' if wall is not None else '—',
        first.get('started', '—'), machine]) + ' |')
  lines += ['', 'Commands (one line per attempt):', '', '```sh']
  for run in group.runs:
    lines += run.commands or [
        f'# {run.path}: not recorded (not started by python -m repertory.run)']
  return lines + ['```']


def _float(value) -> Optional[float]:
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    return float(value)
  return None
