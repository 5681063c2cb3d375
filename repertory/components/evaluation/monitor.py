"""The run monitor: live progress, the stopping rule, and `results.json`.

One `RunMonitor` node watches a whole program. Actors report finished episodes
(`record_episodes`); everything else comes from the shared `Counter`, where
actors add `actor_steps` and learners add `learner_steps`, `policy_lag_sum`,
`policy_lag_items` (items consumed) and `dropped_stale`. Its `run()`
loop prints a progress line every few seconds and, once the actor-step budget
is spent (or the recent training return reaches `stop_at_return`), evaluates
the final weights, writes `<logdir>/results.json` and stops the program.
"""

import collections
import json
import os
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from absl import logging
import numpy as np

from repertory import core
from repertory import launch
from repertory.components import loggers
from repertory.components.evaluation import evaluator

# How many recent training episodes `episode_return_mean` averages over.
RECENT_EPISODES = 100


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
               progress_every_seconds: float = 5.0):
    if max_actor_steps < 1:
      raise ValueError(f'max_actor_steps must be >= 1, got {max_actor_steps}.')
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
    self._start = time.time()
    self._results: Optional[dict] = None
    os.makedirs(logdir, exist_ok=True)
    episodes_path = os.path.join(logdir, 'episodes.csv')
    new = not os.path.exists(episodes_path)
    self._episodes_file = open(episodes_path, 'a')  # pylint: disable=consider-using-with
    if new:
      self._episodes_file.write('time,return,length\n')
    # progress.csv is what `python -m repertory.plot` draws.
    self._progress_files = loggers.Dispatcher([
        loggers.CSVLogger(logdir, 'progress'),
        loggers.TensorBoardLogger(
            os.path.join(logdir, 'tensorboard', 'monitor'), 'actor_steps'),
    ])

  # Called by actors and learners (usually through `handle.futures`).

  def record_episodes(self, returns: Sequence[float],
                      lengths: Sequence[int] = ()) -> None:
    """Records finished training episodes (their returns)."""
    lengths = list(lengths) or [0] * len(returns)
    now = time.time()
    with self._lock:
      self._returns.extend(float(r) for r in returns)
      self._num_episodes += len(returns)
      if not self._episodes_file.closed:
        self._episodes_file.write(''.join(
            f'{now:.3f},{float(r):g},{int(n)}\n'
            for r, n in zip(returns, lengths)))
        self._episodes_file.flush()

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
                                if lag_items > last_items else float('nan')),
          'dropped_stale': int(counts.get('dropped_stale', 0)),
      }
    summary.update(self._table_summaries())
    return summary

  def results(self) -> Optional[dict]:
    """The final results once the run is done, else None."""
    return self._results

  # The node's main loop.

  def run(self) -> None:
    stop = launch.stop_event()
    try:
      while not stop.is_set():
        stop.wait(self._period)
        summary = self.summary()
        self._log_progress(summary)
        self._progress_files.write(summary)
        counts = self._counter.get_counts()
        self._last_lag = (float(counts.get('policy_lag_sum', 0.0)),
                          int(counts.get('policy_lag_items', 0)))
        if self._done(summary):
          self.finish()
          launch.stop()
          return
    finally:
      self._progress_files.close()  # Flushes progress.csv and TensorBoard.
      with self._lock:
        self._episodes_file.close()

  def finish(self) -> dict:
    """Evaluates the final weights and writes `results.json`."""
    summary = self.summary()
    logging.info('Evaluating the final weights over %d episodes.',
                 self._eval_episodes)
    actor = self._make_eval_actor(self._variable_source)
    actor.update(wait=True)
    evaluation = evaluator.evaluate(self._make_environment(), actor,
                                    self._eval_episodes)
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

  def _done(self, summary: Mapping[str, Any]) -> bool:
    if summary['actor_steps'] >= self._max_actor_steps:
      return True
    if self._stop_at_return is None:
      return False
    with self._lock:
      enough = len(self._returns) == RECENT_EPISODES
    return enough and summary['episode_return_mean'] >= self._stop_at_return

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

  def _log_progress(self, summary: Mapping[str, Any]) -> None:
    tables = ' '.join(f'{k[len("tables/"):-len("/size")]}={v}'
                      for k, v in summary.items()
                      if k.startswith('tables/') and k.endswith('/size'))
    self._log_line(
        f'actor_steps={summary["actor_steps"]} '
        f'({summary["actor_steps_per_second"]:.0f}/s) '
        f'learner_steps={summary["learner_steps"]} '
        f'episodes={summary["episodes"]} '
        f'return(last {RECENT_EPISODES})={summary["episode_return_mean"]:.3f} '
        f'policy_lag={summary["policy_lag_recent"]:.2f} '
        f'dropped={summary["dropped_stale"]}' + (f' {tables}' if tables else ''))

  def _log_line(self, line: str) -> None:
    line = f'[{time.time() - self._start:7.1f}s] {line}'
    print(line, flush=True)
    with open(os.path.join(self._logdir, 'progress.log'), 'a') as f:
      f.write(line + '\n')


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
