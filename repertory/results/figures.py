"""The learning curves of one task: every agent's seeds as thin lines, their
mean with the range over seeds shaded, and the published reference on the
training-return panel (the published scores are training returns)."""

import os
import re
from typing import Optional, Sequence

from repertory import plot
from repertory.results import runs as runs_lib

# Panels: the progress.csv column and its title.
TRAINING_RETURN = 'episode_return_mean'
PANELS = (('eval_return_mean', 'greedy evaluation return'),
          (TRAINING_RETURN, 'training return (last 100 episodes)'))
SIZE_INCHES = (12.0, 4.5)
DPI = 100
# Points of the shared grid the mean and range are drawn on.
GRID_POINTS = 200


def slug(env: str) -> str:
  """A file name for task `env` ('minatar:space_invaders' ->
  'minatar-space-invaders')."""
  return re.sub(r'[^a-z0-9]+', '-', env.lower()).strip('-') or 'task'


def check_matplotlib() -> None:
  """Raises `ResultsError` unless matplotlib can be imported."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    raise runs_lib.ResultsError(
        "The results page draws its figures with matplotlib: pip install "
        "'repertory[plot]'.") from None


def draw(env: str, groups: Sequence[runs_lib.Group],
         reference: Optional[float], out: str) -> str:
  """Draws the curves of `groups` (all on task `env`) to the PNG `out`.

  The same groups give the same bytes: fixed size and resolution,
  matplotlib's default style whatever the user's settings, no metadata.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  with matplotlib.style.context('default'):
    figure, axes = plt.subplots(1, len(PANELS), figsize=SIZE_INCHES)
    for i, group in enumerate(groups):
      color = f'C{i % 10}'
      for axis, (metric, _) in zip(axes, PANELS):
        _draw_group(axis, group, metric, color)
    for axis, (metric, title) in zip(axes, PANELS):
      if reference is not None and metric == TRAINING_RETURN:
        axis.axhline(reference, color='black', linestyle='--', linewidth=1,
                     label='published reference')
      axis.set_title(f'{env}: {title}')
      axis.set_xlim(left=0)
      axis.set_xlabel('actor steps (frames)')
      axis.set_ylabel('return')
      axis.grid(alpha=0.3)
      if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize='small', loc='best')
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    figure.savefig(out, dpi=DPI, metadata={'Software': None})
    plt.close(figure)
  return out


def _draw_group(axis, group: runs_lib.Group, metric: str, color: str
                ) -> None:
  """One group's seeds (thin, dots at the measured points), their mean and
  min-max band over the steps every seed covers."""
  curves = [run.curves[metric] for run in group.runs
            if metric in run.curves and len(run.curves[metric][0])]
  if not curves:
    return
  for x, y in curves:  # Dots: the measured points.
    axis.plot(x, y, color=color, linewidth=0.6, alpha=0.4, marker='.',
              markersize=4)
  x, mean, lo, hi = plot.mean_and_range(curves, num_points=GRID_POINTS)
  seeds = f'{len(curves)} seed{"s" if len(curves) > 1 else ""}'
  axis.plot(x, mean, color=color, linewidth=1.8,
            label=f'{group.name} (mean of {seeds})')
  if len(curves) > 1:
    axis.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
