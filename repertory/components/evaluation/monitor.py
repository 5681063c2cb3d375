"""The run monitor: live progress, the stopping rule, and `results.json`.

One `RunMonitor` node watches a whole program. Actors report finished episodes
(`record_episodes`) and take their steps from the monitor's exact
`StepsBudget` (`acquire_steps`, through `evaluation.ActorReporter`); an
evaluator node (`PeriodicEvaluator`) reports greedy evaluations
(`record_evaluation`); everything else comes from the shared `Counter`, where
actors add `actor_steps` and learners add `learner_steps`, `policy_lag_sum`,
`policy_lag_items` (items consumed) and `dropped_stale`.

Its `run()` loop prints a progress line every few seconds and stops the run
as soon as it is done: the actor-step budget is spent, or the return judged
by `stop_at_return` (the last `stop_evaluations` evaluations in a row when
there is an evaluator, else the mean of the last 100 training episodes)
reaches it. It then evaluates the final weights, writes
`<logdir>/results.json` and stops the program.

Files: `progress.csv` (one row per progress line, one per evaluation, with
`eval_return_mean`; what `repertory.plot` reads), `progress.log`, and
TensorBoard event files under `tensorboard/<node>` keyed by actor steps and
`tensorboard/by_learner_steps/<node>` keyed by learner steps, for the nodes
`monitor` (tags `monitor/...`: rates, policy lag, tables), `actor` (tags
`actor/...`: the training episodes the actors report) and `evaluator` (tags
`evaluator/...`: the greedy evaluations).
"""

import collections
import contextlib
import json
import os
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from absl import logging
import numpy as np

from repertory import core
from repertory import launch
from repertory.components import counting
from repertory.components import loggers
from repertory.components.evaluation import evaluator

# How many recent training episodes `episode_return_mean` averages over.
RECENT_EPISODES = 100
# The longest the monitor takes to notice the end of a run it was not told of
# (actors that count through the counter rather than the budget).
CHECK_EVERY_SECONDS = 0.25

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


class RunMonitor:
  """Watches a run; stops it and writes its results when it is done.

  Args:
    counter: anything with `get_counts() -> dict` (a `Counter` or its handle)
      holding the counts named above.
    make_environment: builds the evaluation environment.
    make_eval_actor: builds a `core.Actor` (no adder) that acts with the
      weights of the variable source it is given; called with `variable_source`.
    variable_source: the learner (handle), passed to `make_eval_actor`.
    logdir: where `results.json`, `progress.log` and `episodes.csv` (one
      row per finished training episode: wall time, return, length, as
      received) are written.
    max_actor_steps: the actor-step budget.
    stop_at_return: stop early once the mean return of the last
      `RECENT_EPISODES` training episodes reaches this (None: never).
    eval_episodes: evaluation episodes with the final weights.
    metadata: extra fields for `results.json` (agent, env, launch type, ...).
    replay: optional Reverb client whose tables' sizes and samples per
      insert are summarized (`tables/<name>/size`,
      `tables/<name>/samples_per_insert`).
    progress_every_seconds: period of the progress line.
    judge_evaluation: `stop_at_return` judges the periodic evaluations
      (`record_evaluation`) instead of the recent training episodes.
    stop_evaluations: with `judge_evaluation`, how many evaluations in a row
      must reach `stop_at_return`.
  """

  def __init__(self,
               counter: Any,
               make_environment: Callable[[], Any],
               make_eval_actor: Callable[[Any], core.Actor],
               variable_source: Any,
               logdir: str,
               max_actor_steps: int,
               stop_at_return: Optional[float] = None,
               eval_episodes: int = 20,
               metadata: Optional[Mapping[str, Any]] = None,
               replay: Any = None,
               progress_every_seconds: float = 5.0,
               judge_evaluation: bool = False,
               stop_evaluations: int = 1):
    if max_actor_steps < 1:
      raise ValueError(f'max_actor_steps must be >= 1, got {max_actor_steps}.')
    if stop_evaluations < 1:
      raise ValueError(
          f'stop_evaluations must be >= 1, got {stop_evaluations}.')
    self._counter = counter
    self._make_environment = make_environment
    self._make_eval_actor = make_eval_actor
    self._variable_source = variable_source
    self._logdir = logdir
    self._max_actor_steps = max_actor_steps
    self._stop_at_return = stop_at_return
    self._eval_episodes = eval_episodes
    self._metadata = dict(metadata or {})
    self._replay = replay
    self._period = progress_every_seconds
    self._lock = threading.Lock()
    self._returns = collections.deque(maxlen=RECENT_EPISODES)
    self._num_episodes = 0
    self._last_lag = (0.0, 0)  # (policy_lag_sum, policy_lag_items) last seen.
    self._recent_lag = float('nan')  # Over the last interval that had items.
    self._judge_evaluation = judge_evaluation
    self._evaluation: Optional[Dict[str, Any]] = None  # The latest one.
    self._judged = collections.deque(maxlen=stop_evaluations)  # Their means.
    self._budget: Optional[counting.StepsBudget] = None
    self._wake = threading.Event()  # Set when the run may be done.
    self._first_steps = None  # (actor_steps, time) at the first progress line.
    self._start = time.time()
    self._results: Optional[dict] = None
    # Set once the run is done: actors get no more steps and late periodic
    # evaluations are dropped, so results.json holds the steps taken.
    self._finishing = threading.Event()
    os.makedirs(logdir, exist_ok=True)
    episodes_path = os.path.join(logdir, 'episodes.csv')
    new = not os.path.exists(episodes_path)
    self._episodes_file = open(episodes_path, 'a')  # pylint: disable=consider-using-with
    if new:
      self._episodes_file.write('time,return,length\n')
    self._tick_episodes = []  # (return, length) since the last progress row.
    # progress.csv is what `python -m repertory.plot` draws.
    self._progress_csv = loggers.CSVLogger(logdir, 'progress')
    self._boards = {node: tensorboard_files(logdir, node)
                    for node in ('monitor', 'actor', 'evaluator')}

  # Called by actors and learners (usually through `handle.futures`).

  def record_episodes(self, returns: Sequence[float],
                      lengths: Sequence[int] = ()) -> None:
    """Records finished training episodes (their returns)."""
    lengths = list(lengths) or [0] * len(returns)
    now = time.time()
    with self._lock:
      self._returns.extend(float(r) for r in returns)
      self._tick_episodes.extend(
          (float(r), int(n)) for r, n in zip(returns, lengths))
      self._num_episodes += len(returns)
      if not self._episodes_file.closed:
        self._episodes_file.write(''.join(
            f'{now:.3f},{float(r):g},{int(n)}\n'
            for r, n in zip(returns, lengths)))
        self._episodes_file.flush()
    if not self._judge_evaluation and self._return_reached():
      self._wake.set()

  def acquire_steps(self, holder: str, used: int, wanted: int,
                    first: bool = False) -> int:
    """Counts `used` actor steps of `holder`; grants it up to `wanted` more
    within the budget (`counting.StepsBudget.acquire`)."""
    with self._lock:
      if self._budget is None:  # Resumed runs continue from their count.
        counted = int(self._counter.get_counts().get('actor_steps', 0))
        self._budget = counting.StepsBudget(self._max_actor_steps, counted)
    # Counted before the budget hears of them: once the budget shows the
    # last steps used, the monitor's loop may finish at once, and its
    # results must hold them.
    if used:
      self._counter.increment(actor_steps=used)
    granted = self._budget.acquire(holder, used, wanted, first)
    if self._finishing.is_set():
      granted = 0  # Done (e.g. solved): actors wait for the stop.
    if self._budget.exhausted():
      self._wake.set()
    return granted

  def record_evaluation(self, actor_steps: int, learner_steps: int,
                        evaluation: Mapping[str, Any],
                        final: bool = False) -> None:
    """Records a periodic evaluation (`EvaluationResult.as_dict('eval')`)
    of the weights current at `actor_steps` (`final`: the last one, of the
    final weights)."""
    if self._finishing.is_set() and not final:
      return  # An evaluation that ran past the end of the run.
    row = {'actor_steps': int(actor_steps),
           'learner_steps': int(learner_steps),
           'wall_seconds': time.time() - self._start}
    row.update(evaluation)
    with self._lock:
      self._evaluation = dict(row)
      if not final:
        self._judged.append(float(row.get('eval_return_mean', float('nan'))))
      self._progress_csv.write(row)
      self._boards['evaluator'].write(
          {k[len('eval_'):] if k.startswith('eval_') else k: v
           for k, v in row.items()})
    if final:
      return
    self._log_line(f'evaluation at actor_steps={row["actor_steps"]}: '
                   f'return={row["eval_return_mean"]:.3f} over '
                   f'{row["eval_episodes"]} episodes')
    if self._judge_evaluation and self._return_reached():
      self._wake.set()

  def summary(self) -> Dict[str, Any]:
    """The current statistics of the run."""
    counts = dict(self._counter.get_counts())
    wall = time.time() - self._start
    actor_steps = int(counts.get('actor_steps', 0))
    lag_sum = float(counts.get('policy_lag_sum', 0.0))
    lag_items = int(counts.get('policy_lag_items', 0))
    last_sum, last_items = self._last_lag
    with self._lock:
      summary = {
          'actor_steps': actor_steps,
          'learner_steps': int(counts.get('learner_steps', 0)),
          'wall_seconds': wall,
          'actor_steps_per_second': actor_steps / max(wall, 1e-9),
          'episodes': self._num_episodes,
          'episode_return_mean': (float(np.mean(self._returns))
                                  if self._returns else float('nan')),
          'policy_lag_mean': lag_sum / lag_items if lag_items else float('nan'),
          'policy_lag_recent': ((lag_sum - last_sum) / (lag_items - last_items)
                                if lag_items > last_items else
                                self._recent_lag),
          'dropped_stale': int(counts.get('dropped_stale', 0)),
      }
    summary.update(self._table_summaries())
    return summary

  def evaluation(self) -> Optional[Dict[str, Any]]:
    """The latest periodic evaluation (None before the first)."""
    with self._lock:
      return dict(self._evaluation) if self._evaluation else None

  def results(self) -> Optional[dict]:
    """The final results once the run is done, else None."""
    return self._results

  # The node's main loop.

  def run(self) -> None:
    stop = launch.stop_event()
    next_progress = time.monotonic() + self._period
    try:
      while not stop.is_set():
        self._wake.wait(min(self._period, CHECK_EVERY_SECONDS))
        self._wake.clear()
        progress = time.monotonic() >= next_progress
        if progress:
          next_progress = time.monotonic() + self._period
          summary = self.summary()
          self._log_progress(summary)
          self._write_progress(summary)
          counts = self._counter.get_counts()
          lag = (float(counts.get('policy_lag_sum', 0.0)),
                 int(counts.get('policy_lag_items', 0)))
          if lag[1] > self._last_lag[1]:
            self._recent_lag = ((lag[0] - self._last_lag[0]) /
                                (lag[1] - self._last_lag[1]))
          self._last_lag = lag
        if self._done():
          self.finish()
          launch.stop()
          return
    finally:
      with self._lock:
        self._progress_csv.close()  # Flushes progress.csv and TensorBoard.
        for board in self._boards.values():
          board.close()
        self._episodes_file.close()

  def finish(self) -> dict:
    """Evaluates the final weights and writes `results.json`."""
    self._finishing.set()
    summary = self.summary()
    self._log_progress(summary)  # Where the run ended.
    self._write_progress(summary)  # The curves' last point.
    logging.info('Evaluating the final weights over %d episodes.',
                 self._eval_episodes)
    actor = self._make_eval_actor(self._variable_source)
    actor.update(wait=True)
    evaluation = evaluator.evaluate(self._make_environment(), actor,
                                    self._eval_episodes)
    self.record_evaluation(summary['actor_steps'], summary['learner_steps'],
                           evaluation.as_dict('eval'), final=True)
    results = dict(self._metadata)
    results.update(summary)
    results.update(evaluation.as_dict('eval'))
    results['wall_seconds'] = time.time() - self._start
    path = os.path.join(self._logdir, 'results.json')
    text = json.dumps(_jsonable(results), indent=2, sort_keys=True)
    with open(path + '.tmp', 'w') as f:
      f.write(text)
    os.replace(path + '.tmp', path)  # Never a half-written results file.
    self._log_line(f'results: eval_return_mean={results["eval_return_mean"]:.3f}'
                   f' over {results["eval_episodes"]} episodes; wrote {path}')
    self._results = results
    return results

  def _write_progress(self, summary: Mapping[str, Any]) -> None:
    """A progress row: progress.csv, and TensorBoard's `monitor/...` (the
    run's figures) and `actor/...` (the training episodes since the last
    row: their mean return and length; the mean of the last 100)."""
    steps = {'actor_steps': summary['actor_steps'],
             'learner_steps': summary['learner_steps']}
    episode_keys = ('episodes', 'episode_return_mean')
    with self._lock:
      episodes, self._tick_episodes = self._tick_episodes, []
      self._progress_csv.write(summary)
      self._boards['monitor'].write(
          {k: v for k, v in summary.items() if k not in episode_keys})
      actor = dict(steps, episodes=summary['episodes'],
                   episode_return_mean=summary['episode_return_mean'],
                   steps_per_second=summary['actor_steps_per_second'])
      if episodes:
        actor['episode_return'] = float(np.mean([r for r, _ in episodes]))
        if all(n > 0 for _, n in episodes):  # Lengths were reported.
          actor['episode_length'] = float(np.mean([n for _, n in episodes]))
      self._boards['actor'].write(actor)

  def _done(self) -> bool:
    """True once the budget is spent or the judged return is reached."""
    if self._budget is not None and self._budget.exhausted():
      return True
    # Actors that do not take their steps from the budget count directly.
    counts = self._counter.get_counts()
    if int(counts.get('actor_steps', 0)) >= self._max_actor_steps:
      return True
    return self._return_reached()

  def _return_reached(self) -> bool:
    if self._stop_at_return is None:
      return False
    with self._lock:
      if self._judge_evaluation:  # The last `stop_evaluations` in a row.
        if len(self._judged) < self._judged.maxlen:
          return False
        value = min(self._judged)
      elif len(self._returns) == RECENT_EPISODES:
        value = float(np.mean(self._returns))
      else:
        return False
    return bool(value >= self._stop_at_return)

  def _table_summaries(self) -> Dict[str, float]:
    """`tables/<name>/size` and `tables/<name>/samples_per_insert` (items
    sampled per item inserted since the table was created: 1 for a queue
    whose every unroll is consumed once, the rate limiter's ratio for
    replay; nan before the first insert) of every Reverb table."""
    if self._replay is None:
      return {}
    try:
      info = self._replay.server_info(timeout=1)
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

  def _budget_part(self, actor_steps: int) -> str:
    """'12.5% of 1000000, ETA 3m20s' (the rate since this monitor started)."""
    if self._first_steps is None:
      self._first_steps = (actor_steps, time.time())
    share = 100.0 * actor_steps / self._max_actor_steps
    done, since = actor_steps - self._first_steps[0], self._first_steps[1]
    rate = done / max(time.time() - since, 1e-9)
    left = max(self._max_actor_steps - actor_steps, 0)
    if not done or not rate:
      return f'{share:.1f}% of {self._max_actor_steps}'
    eta = int(left / rate)
    return (f'{share:.1f}% of {self._max_actor_steps}, ETA '
            f'{eta // 3600}h{eta % 3600 // 60:02d}m' if eta >= 3600 else
            f'{share:.1f}% of {self._max_actor_steps}, ETA '
            f'{eta // 60}m{eta % 60:02d}s')

  def _log_progress(self, summary: Mapping[str, Any]) -> None:
    tables = ' '.join(f'{k[len("tables/"):-len("/size")]}={v}'
                      for k, v in summary.items()
                      if k.startswith('tables/') and k.endswith('/size'))
    self._log_line(
        f'actor_steps={summary["actor_steps"]} '
        f'[{self._budget_part(summary["actor_steps"])}] '
        f'({summary["actor_steps_per_second"]:.0f}/s) '
        f'learner_steps={summary["learner_steps"]} '
        f'episodes={summary["episodes"]} '
        f'return(last {RECENT_EPISODES})={summary["episode_return_mean"]:.3f} '
        f'policy_lag={summary["policy_lag_recent"]:.2f} '
        f'dropped={summary["dropped_stale"]}' + (f' {tables}' if tables else ''))

  def _log_line(self, line: str) -> None:
    line = f'[{time.time() - self._start:7.1f}s] {line}'
    if not _lines_shown_elsewhere:
      print(line, flush=True)
    with open(os.path.join(self._logdir, 'progress.log'), 'a') as f:
      f.write(line + '\n')


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


def _jsonable(values: Mapping[str, Any]) -> dict:
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
