r"""Draws learning curves of one or more runs to a PNG.

  python -m repertory.plot runs/impala-catch runs/seed-catch --out=curves.png

Each argument is a run directory (one holding `progress.csv`, written by the
run monitor) or a directory of runs, e.g. a sweep's `--logdir`. Runs whose
directory names differ only in a `seed<N>` part (`python -m repertory.run
--seeds=3 --logdir=runs/x` writes `runs/x/default/seed0`, `.../seed1`, ...)
form one line: the mean over seeds, shaded between the lowest and highest
seed. One row of panels per metric (`--metrics`: the recent training return
and the greedy evaluation return by default), against actor steps (left) and
wall-clock time (right), with markers.
"""

import collections
import csv
import json
import os
import re
from typing import Dict, List, Sequence, Tuple, Union

from absl import app
from absl import flags
import numpy as np

PROGRESS_FILE = 'progress.csv'
# What is drawn unless --metrics says: the returns, and a league's
# exploitability (of the newest snapshot and of the pool's average) where a
# run has it.
DEFAULT_METRICS = ('episode_return_mean', 'eval_return_mean',
                   'exploitability', 'exploitability_pool')
_SEED_PART = re.compile(r'([-_/]?seed[-_]?\d+)')


def define_flags() -> None:
  """The command's flags, defined when it runs as a program (so that
  repertory.results, which has an `--out` of its own, can import it)."""
  flags.DEFINE_string('out', 'curves.png', 'Where to write the PNG.')
  flags.DEFINE_list(
      'metrics', list(DEFAULT_METRICS),
      'The progress.csv columns to plot, one row of panels each (a column no '
      'run has is skipped).')


def find_runs(paths: Sequence[str]) -> List[str]:
  """Run directories (holding progress.csv) at or below `paths`."""
  runs = []
  for path in paths:
    if not os.path.isdir(path):
      raise FileNotFoundError(f'{path!r} is not a directory.')
    for root, _, files in os.walk(path):
      if PROGRESS_FILE in files:
        runs.append(root)
  if not runs:
    raise FileNotFoundError(
        f'No {PROGRESS_FILE} under {list(paths)}: pass run directories '
        '(the --logdir of python -m repertory.run).')
  return sorted(runs)


def read_progress(run: str, metric: str) -> Dict[str, np.ndarray]:
  """Columns actor_steps, wall_seconds and `metric` of a run's progress.csv."""
  columns = collections.defaultdict(list)
  with open(os.path.join(run, PROGRESS_FILE)) as f:
    for row in csv.DictReader(f):
      try:
        values = [float(row[k]) for k in ('actor_steps', 'wall_seconds', metric)]
      except (KeyError, ValueError, TypeError):
        continue  # A row without the metric yet (e.g. no episode finished).
      if not np.isfinite(values[2]):
        continue
      for key, value in zip(('actor_steps', 'wall_seconds', metric), values):
        columns[key].append(value)
  final = _results(run)  # The run's end: a short run's curve is not a dot.
  try:
    values = [float(final[k]) for k in ('actor_steps', 'wall_seconds', metric)]
  except (KeyError, ValueError, TypeError):
    values = None
  if values and np.isfinite(values[2]) and (
      not columns['actor_steps'] or values[0] > columns['actor_steps'][-1]):
    for key, value in zip(('actor_steps', 'wall_seconds', metric), values):
      columns[key].append(value)
  return {k: np.asarray(v) for k, v in columns.items() if v}


def _results(run: str) -> Dict[str, object]:
  """The run's results.json, else its config.json's experiment ({} if
  neither is readable)."""
  for name, key in (('results.json', None), ('config.json', 'experiment')):
    try:
      with open(os.path.join(run, name)) as f:
        value = json.load(f)
    except (OSError, ValueError):
      continue
    value = value.get(key, {}) if key else value
    if isinstance(value, dict):
      return value
  return {}


def title(runs: Sequence[str]) -> str:
  """'<agent> on <env>' of the runs (each pair once)."""
  names = []
  for run in runs:
    info = _results(run)
    name = f'{info.get("agent", "?")} on {info.get("env", "?")}'
    if name not in names:
      names.append(name)
  return '; '.join(names)


def group_runs(runs: Sequence[str]) -> Dict[str, List[str]]:
  """Groups runs that differ only in their seed; label -> runs."""
  groups = collections.defaultdict(list)
  for run in runs:
    label = _SEED_PART.sub('', os.path.normpath(run)) or run
    groups[label].append(run)
  return dict(groups)


def mean_and_range(curves: Sequence[Tuple[np.ndarray, np.ndarray]],
                   num_points: int = 200
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """Curves (x, y) on one grid; returns x, mean, lo, hi.

  One curve is returned as its points. For several, the grid is every
  curve's x (or `num_points` evenly spaced when there are more) over the
  span of all of them, and each point averages the curves that cover it: a
  curve is never extrapolated, and no curve's early or late points are cut
  off.
  """
  curves = [(np.asarray(x, float), np.asarray(y, float))
            for x, y in curves if len(x)]
  if not curves:
    raise ValueError('No data points to plot.')
  if len(curves) == 1:
    x, y = curves[0]
    return x, y, y, y
  grid = np.unique(np.concatenate([x for x, _ in curves]))
  if len(grid) > num_points:
    grid = np.linspace(grid[0], grid[-1], num_points)
  ys = np.stack([np.where((grid >= x[0]) & (grid <= x[-1]),
                          np.interp(grid, x, y), np.nan) for x, y in curves])
  return grid, np.nanmean(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)


def plot(paths: Sequence[str], out: str,
         metric: Union[str, Sequence[str]] = DEFAULT_METRICS) -> str:
  """Draws the learning curves of the runs under `paths` to `out` (PNG)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  metrics = [metric] if isinstance(metric, str) else list(metric)
  groups = group_runs(find_runs(paths))
  data = {label: [read_progress(run, m) for run in runs for m in metrics]
          for label, runs in groups.items()}
  present = [m for i, m in enumerate(metrics)
             if any(m in d for ds in data.values()
                    for d in ds[i::len(metrics)])]
  if not present:
    raise ValueError(f'No run has any of the columns {metrics}.')
  prefix = os.path.commonpath(list(groups)) if len(groups) > 1 else ''
  figure, axes = plt.subplots(len(present), 2,
                              figsize=(12, 4.5 * len(present)), squeeze=False)
  for label, runs in sorted(groups.items()):
    name = os.path.relpath(label, prefix) if prefix else os.path.basename(label)
    name += f' ({len(runs)} seeds)' if len(runs) > 1 else ''
    for row, m in enumerate(present):
      i = metrics.index(m)
      columns = data[label][i::len(metrics)]
      for axis, x_key in zip(axes[row], ('actor_steps', 'wall_seconds')):
        curves = [(d[x_key], d[m]) for d in columns if m in d]
        if not any(len(x) for x, _ in curves):
          continue
        points = max(len(x) for x, _ in curves)
        x, mean, lo, hi = mean_and_range(curves, num_points=max(points, 2))
        (line,) = axis.plot(x, mean, label=name, marker='o', markersize=3)
        if len(curves) > 1:
          axis.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
  for row, m in enumerate(present):
    for axis, xlabel in zip(axes[row], ('actor steps', 'wall-clock seconds')):
      axis.set_xlabel(xlabel)
      axis.set_ylabel(m.replace('_', ' '))
      axis.grid(alpha=0.3)
  axes[0][0].legend(fontsize='small')
  figure.suptitle(title([run for runs in groups.values() for run in runs]))
  figure.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  figure.savefig(out, dpi=100)
  plt.close(figure)
  return out


def main(argv: List[str]) -> None:
  if len(argv) < 2:
    raise app.UsageError('Pass one or more run directories.')
  print(f'wrote {plot(argv[1:], flags.FLAGS.out, flags.FLAGS.metrics)}')


if __name__ == '__main__':
  define_flags()
  app.run(main)
