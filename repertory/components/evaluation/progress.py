"""The run monitor's outputs: progress lines, `progress.csv`, `episodes.csv`
and TensorBoard events, all written from the same rows.

`ProgressFiles` writes them; the monitor hands it each progress row (a
`RunMonitor.summary()`), each evaluation row and each batch of finished
training episodes. Files, under the run's logdir:

- `progress.log`: the progress lines, also printed (unless
  `lines_shown_elsewhere`);
- `progress.csv`: one row per progress line and one per evaluation (with
  `eval_return_mean`); what `repertory.plot` reads;
- `episodes.csv`: one row per finished training episode (wall time, return,
  length, as received);
- `tensorboard/<node>` (keyed by actor steps) and
  `tensorboard/by_learner_steps/<node>` (keyed by learner steps) for the
  nodes `monitor` (rates, policy lag, tables), `actor` (the training
  episodes) and `evaluator` (the evaluations).
"""

import contextlib
import math
import os
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np

from repertory.components import loggers

# How many recent training episodes `episode_return_mean` averages over.
RECENT_EPISODES = 100

# While > 0, monitors in this process write their lines to progress.log only
# (`run_experiment` shows that file itself, e.g. as a progress bar).
_lines_shown_elsewhere = 0
_lines_lock = threading.Lock()


@contextlib.contextmanager
def lines_shown_elsewhere():
  """Within it, monitors in this process do not print their progress lines
  (they still write them to progress.log)."""
  global _lines_shown_elsewhere
  with _lines_lock:
    _lines_shown_elsewhere += 1
  try:
    yield
  finally:
    with _lines_lock:
      _lines_shown_elsewhere -= 1


def tensorboard_files(logdir: str, node: str) -> loggers.Logger:
  """The TensorBoard events of `node`'s rows, tags `<node>/<key>`: keyed by
  actor steps in `<logdir>/tensorboard/<node>`, and by learner steps in
  `<logdir>/tensorboard/by_learner_steps/<node>` (rows carry both counts)."""
  board = os.path.join(logdir, 'tensorboard')
  return loggers.Dispatcher([
      loggers.TensorBoardLogger(os.path.join(board, node), 'actor_steps',
                                prefix=node),
      loggers.TensorBoardLogger(os.path.join(board, 'by_learner_steps', node),
                                'learner_steps', prefix=node),
  ])


class ProgressFiles:
  """Writes the monitor's rows and lines (see the module docstring).

  Args:
    logdir: the run's directory.
    max_actor_steps: the budget (the share and ETA of the progress line).
    start: the run's start (`time.time()`), the lines' clock.
    metrics_source: see `MetricsRows`; read with each progress row.
  """

  def __init__(self, logdir: str, max_actor_steps: int, start: float,
               metrics_source: Any = None):
    self._logdir = logdir
    self._max_actor_steps = max_actor_steps
    self._start = start
    self._lock = threading.Lock()
    self._first_steps: Optional[Tuple[int, float]] = None
    self._tick_episodes: List[Tuple[float, int]] = []  # Since the last row.
    os.makedirs(logdir, exist_ok=True)
    episodes_path = os.path.join(logdir, 'episodes.csv')
    new = not os.path.exists(episodes_path)
    self._episodes_file = open(episodes_path, 'a')  # pylint: disable=consider-using-with
    if new:
      self._episodes_file.write('time,return,length\n')
    self._progress_csv = loggers.CSVLogger(logdir, 'progress')
    self._boards = {node: tensorboard_files(logdir, node)
                    for node in ('monitor', 'actor', 'evaluator')}
    self._metrics = MetricsRows(metrics_source, self)

  def episodes(self, returns: Sequence[float], lengths: Sequence[int]) -> None:
    """Appends finished training episodes to episodes.csv."""
    now = time.time()
    with self._lock:
      self._tick_episodes.extend(
          (float(r), int(n)) for r, n in zip(returns, lengths))
      if not self._episodes_file.closed:
        self._episodes_file.write(''.join(
            f'{now:.3f},{float(r):g},{int(n)}\n'
            for r, n in zip(returns, lengths)))
        self._episodes_file.flush()

  def progress(self, summary: Mapping[str, Any]) -> None:
    """A progress row: the line, progress.csv, and TensorBoard's
    `monitor/...` (the run's figures) and `actor/...` (the training
    episodes since the last row: their mean return and length; the mean of
    the last 100)."""
    self._line(self._progress_line(summary))
    episode_keys = ('episodes', 'episode_return_mean')
    with self._lock:
      episodes, self._tick_episodes = self._tick_episodes, []
      self._progress_csv.write(summary)
      self._boards['monitor'].write(
          {k: v for k, v in summary.items() if k not in episode_keys})
      actor = {'actor_steps': summary['actor_steps'],
               'learner_steps': summary['learner_steps'],
               'episodes': summary['episodes'],
               'episode_return_mean': summary['episode_return_mean'],
               'steps_per_second': summary['actor_steps_per_second']}
      if episodes:
        actor['episode_return'] = float(np.mean([r for r, _ in episodes]))
        if all(n > 0 for _, n in episodes):  # Lengths were reported.
          actor['episode_length'] = float(np.mean([n for _, n in episodes]))
      self._boards['actor'].write(actor)
    self._metrics.poll(summary)

  def final_metrics(self, summary: Mapping[str, Any]) -> Dict[str, Any]:
    """`MetricsRows.poll(summary, final=True)`: the figures for
    results.json."""
    return self._metrics.poll(summary, final=True)

  def evaluation(self, row: Mapping[str, Any], final: bool) -> None:
    """An evaluation row: progress.csv, TensorBoard's `evaluator/...` and
    (periodic ones) a line."""
    with self._lock:
      self._progress_csv.write(row)
      self._boards['evaluator'].write(
          {k[len('eval_'):] if k.startswith('eval_') else k: v
           for k, v in row.items()})
    if not final:
      self._line(f'evaluation at actor_steps={row["actor_steps"]}: '
                 f'{evaluation_text(row)}')

  def metrics(self, row: Mapping[str, Any], final: bool) -> None:
    """A row of figures computed elsewhere (a league's exploitability):
    progress.csv, TensorBoard's `evaluator/...` and a line."""
    with self._lock:
      self._progress_csv.write(row)
      self._boards['evaluator'].write(row)
    figures = ' '.join(
        f'{k}={v:.4f}' if isinstance(v, float) else f'{k}={v}'
        for k, v in row.items()
        if k not in ('actor_steps', 'learner_steps', 'wall_seconds'))
    self._line(f'{"final " if final else ""}metrics at '
               f'actor_steps={row["actor_steps"]}: {figures}')

  def line(self, text: str) -> None:
    self._line(text)

  def close(self) -> None:
    with self._lock:
      self._progress_csv.close()  # Flushes progress.csv and TensorBoard.
      for board in self._boards.values():
        board.close()
      self._episodes_file.close()

  def _budget_part(self, actor_steps: int) -> str:
    """'12.5% of 1000000, ETA 3m20s' (the rate since the first line)."""
    if self._first_steps is None:
      self._first_steps = (actor_steps, time.time())
    share = f'{100.0 * actor_steps / self._max_actor_steps:.1f}%'
    done = actor_steps - self._first_steps[0]
    rate = done / max(time.time() - self._first_steps[1], 1e-9)
    if not done or not rate:
      return f'{share} of {self._max_actor_steps}'
    eta = int(max(self._max_actor_steps - actor_steps, 0) / rate)
    eta_text = (f'{eta // 3600}h{eta % 3600 // 60:02d}m' if eta >= 3600 else
                f'{eta // 60}m{eta % 60:02d}s')
    return f'{share} of {self._max_actor_steps}, ETA {eta_text}'

  def _progress_line(self, summary: Mapping[str, Any]) -> str:
    tables = ' '.join(f'{k[len("tables/"):-len("/size")]}={v}'
                      for k, v in summary.items()
                      if k.startswith('tables/') and k.endswith('/size'))
    return (
        f'actor_steps={summary["actor_steps"]} '
        f'[{self._budget_part(summary["actor_steps"])}] '
        f'({summary["actor_steps_per_second"]:.0f}/s) '
        f'learner_steps={summary["learner_steps"]} '
        f'episodes={summary["episodes"]} '
        f'return(last {RECENT_EPISODES})={summary["episode_return_mean"]:.3f} '
        f'policy_lag={summary["policy_lag_recent"]:.2f} '
        f'dropped={summary["dropped_stale"]}'
        + (f' evaluation_steps={summary["evaluation_steps"]}'
           if summary.get('evaluation_steps') else '')
        + (f' {tables}' if tables else ''))

  def _line(self, text: str) -> None:
    text = f'[{time.time() - self._start:7.1f}s] {text}'
    if not _lines_shown_elsewhere:
      print(text, flush=True)
    with open(os.path.join(self._logdir, 'progress.log'), 'a') as f:
      f.write(text + '\n')


class MetricsRows:
  """Figures computed elsewhere (a league's exploitability) as evaluation
  rows: `source.evaluation_metrics(final)` is read with each progress row,
  new figures are written (`ProgressFiles.metrics`), and the final ones
  (read when the run finishes) join results.json."""

  def __init__(self, source: Any, files: ProgressFiles):
    self._source, self._files = source, files
    self._last: Dict[str, Any] = {}

  def poll(self, summary: Mapping[str, Any],
           final: bool = False) -> Dict[str, Any]:
    """The source's figures if new (or `final`), written as a row with the
    counts of `summary`; {} otherwise, or when the source failed."""
    if self._source is None:
      return {}
    try:
      figures = dict(self._source.evaluation_metrics(final))
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('No evaluation metrics from %s: %s',
                      type(self._source).__name__, e)
      return {}
    if not figures or (figures == self._last and not final):
      return {}
    self._last = figures
    row = {'actor_steps': summary['actor_steps'],
           'learner_steps': summary['learner_steps'],
           'wall_seconds': summary['wall_seconds']}
    row.update(figures)
    self._files.metrics(row, final)
    return figures


def evaluation_text(row: Mapping[str, Any], prefix: str = 'eval') -> str:
  """'return=0.450 (95% CI 0.210..0.690) over 20 episodes, policy version
  12' from an evaluation row."""
  low = row.get(f'{prefix}_return_ci95_low')
  high = row.get(f'{prefix}_return_ci95_high')
  interval = (f' (95% CI {low:.3f}..{high:.3f})'
              if low is not None and high is not None and
              math.isfinite(low) and math.isfinite(high) else '')
  version = row.get(f'{prefix}_policy_version')
  return (f'return={row[f"{prefix}_return_mean"]:.3f}{interval} over '
          f'{row[f"{prefix}_episodes"]} episodes'
          + (f', policy version {version}' if version is not None else ''))


def table_summaries(replay: Any) -> Dict[str, float]:
  """`tables/<name>/size` and `tables/<name>/samples_per_insert` (items
  sampled per item inserted since the table was created: 1 for a queue
  whose every unroll is consumed once, the rate limiter's ratio for
  replay; nan before the first insert) of every Reverb table of `replay`
  (a Reverb client; None: none)."""
  if replay is None:
    return {}
  try:
    info = replay.server_info(timeout=1)
  except Exception:  # pylint: disable=broad-except
    return {}
  summaries = {}
  for name, table in sorted(info.items()):
    limiter = table.rate_limiter_info
    inserts = limiter.insert_stats.completed
    summaries[f'tables/{name}/size'] = int(table.current_size)
    summaries[f'tables/{name}/samples_per_insert'] = (
        limiter.sample_stats.completed / inserts if inserts else float('nan'))
  return summaries


def jsonable(values: Mapping[str, Any]) -> dict:
  """`values` with numpy scalars as Python numbers and non-finite floats as
  None (JSON has no NaN)."""
  out = {}
  for key, value in values.items():
    if isinstance(value, (np.integer,)):
      value = int(value)
    elif isinstance(value, (np.floating,)):
      value = float(value)
    if isinstance(value, float) and not np.isfinite(value):
      value = None
    out[key] = value
  return out
