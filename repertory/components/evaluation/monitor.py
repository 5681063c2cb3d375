"""The run monitor: the step budget, live progress, the stopping rule, and
`results.json`.

One `RunMonitor` node watches a whole program. Actors take their steps from
the monitor's exact `StepsBudget` and report the steps they used with the
episodes those steps finished, in one call (`lease_steps`, through
`evaluation.ActorReporter`); an evaluator node (`PeriodicEvaluator`)
reports evaluations (`record_evaluation`), taking the weights of an exact
step (`wait_for_evaluation_point`). Every count lives in the shared
`Counter`: the monitor adds `actor_steps`, `episodes` and
`evaluation_steps` (all periodic evaluations' steps, apart from the
training steps; each evaluation row has its own `eval_steps`); learners add
`learner_steps`, `policy_lag_sum`, `policy_lag_items` and `dropped_stale`.

Its `run()` loop writes a progress row (`progress.py`) every
`progress_every_seconds` and each time another `PROGRESS_SHARE` of the
budget is spent, and stops the run once the budget is spent or the judged
return (`stopping.StopRule`: the latest evaluations when there is an
evaluator, else the mean of the last 100 training episodes) reaches
`stop_at_return`. `finish` then grants no more steps, halts the learner
(its last counts arrive), saves counts.json, evaluates the final weights
and writes `results.json`, all with the same counts.

How far the outputs agree: results.json and counts.json hold the same
counts (the learner's last included when it has `halt`: a `LearnerHost`).
A progress row, its TensorBoard points and its line hold the counter's
counts when written: each node's own count less at most its last 0.25 s
(`ActorReporter`, `LearnerHost`).
"""

import json
import os
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from absl import logging

from repertory import core
from repertory import launch
from repertory.components import counting
from repertory.components.evaluation import evaluator
from repertory.components.evaluation import points
from repertory.components.evaluation import progress as progress_lib
from repertory.components.evaluation import stopping

RECENT_EPISODES = progress_lib.RECENT_EPISODES
lines_shown_elsewhere = progress_lib.lines_shown_elsewhere
# The longest the monitor takes to notice the end of a run it was not told of
# (actors that count through the counter rather than the budget).
CHECK_EVERY_SECONDS = 0.25
# A progress row also each time this share of the budget is spent.
PROGRESS_SHARE = 0.05
# How long `finish` waits for the actors' last reports.
SETTLE_SECONDS = 2.0


class RunMonitor:
  """Watches a run; stops it and writes its results when it is done.

  Args:
    counter: the shared `Counter` (or its handle).
    make_environment: builds the evaluation environment.
    make_eval_actor: builds a `core.Actor` (no adder) that acts with the
      weights of the variable source it is given; called with `variable_source`.
    variable_source: the learner (handle), passed to `make_eval_actor`;
      halted when the run finishes if it has `halt()`.
    logdir: where results.json and the progress files are written.
    max_actor_steps: the actor-step budget.
    stop_at_return: stop once the judged return reaches this (None: never).
    eval_episodes: evaluation episodes with the final weights (at most).
    metadata: extra fields for results.json (agent, env, launch type, ...).
    replay: optional Reverb client (`progress.table_summaries`).
    progress_every_seconds: period of the progress row.
    judge_evaluation: `stop_at_return` judges the periodic evaluations
      (`record_evaluation`) instead of the recent training episodes.
    stop_evaluations: with `judge_evaluation`, how many evaluations in a row
      must reach `stop_at_return`.
    stop_episodes: ...and how many episodes they must have played together:
      when evaluations are cut short (`eval_fraction` of few training
      steps, long episodes), more of them in a row are judged, each
      reaching `stop_at_return`, until they have.
    eval_fraction: the final evaluation plays at most this share of the
      budget in steps (whole episodes; None: no limit).
    lease_seconds: an actor silent this long loses its reserved steps
      (`StepsBudget`).
    metrics_source: see `progress.MetricsRows` (a league's exploitability).
    eval_every_steps: the periodic evaluator's points (0: none by steps);
      the budget holds at the first from the start, so actors that start
      before the evaluator cannot run past it.
  """

  def __init__(self,
               counter: Any,
               make_environment: Callable[[], Any],
               make_eval_actor: Callable[[Any], core.Actor],
               variable_source: Any,
               logdir: str,
               max_actor_steps: int,
               stop_at_return: Optional[float] = None,
               eval_episodes: int = 100,
               metadata: Optional[Mapping[str, Any]] = None,
               replay: Any = None,
               progress_every_seconds: float = 5.0,
               judge_evaluation: bool = False,
               stop_evaluations: int = 1,
               stop_episodes: int = 1,
               eval_fraction: Optional[float] = evaluator.EVAL_FRACTION,
               lease_seconds: float = 10.0, metrics_source: Any = None,
               eval_every_steps: int = 0):
    if max_actor_steps < 1:
      raise ValueError(f'max_actor_steps must be >= 1, got {max_actor_steps}.')
    self._counter = counter
    self._make_environment = make_environment
    self._make_eval_actor = make_eval_actor
    self._variable_source = variable_source
    self._logdir = logdir
    self._max_actor_steps = max_actor_steps
    self._eval_episodes = eval_episodes
    self._eval_fraction = eval_fraction
    self._lease_seconds = lease_seconds
    self._metadata = dict(metadata or {})
    self._replay = replay
    self._period = progress_every_seconds
    self._lock = threading.Lock()
    self._stop = stopping.StopRule(stop_at_return, judge_evaluation,
                                   stop_evaluations, stop_episodes,
                                   RECENT_EPISODES)
    self._last_lag = (0.0, 0)  # (policy_lag_sum, policy_lag_items) last seen.
    self._recent_lag = float('nan')  # Over the last interval that had items.
    self._evaluation: Optional[Dict[str, Any]] = None  # The latest one.
    self._budget: Optional[counting.StepsBudget] = None
    self._eval_every_steps = int(eval_every_steps)
    self._holds: Optional[points.PointHolds] = None  # With the budget.
    self._wake = threading.Event()  # Set when the run may be done.
    self._start = time.time()
    self._results: Optional[dict] = None
    # Set once the run is done: actors get no more steps and late periodic
    # evaluations are dropped, so results.json holds the steps taken.
    self._finishing = threading.Event()
    self._files = progress_lib.ProgressFiles(logdir, max_actor_steps,
                                             self._start, metrics_source)

  def record_episodes(self, returns: Sequence[float],
                      lengths: Sequence[int] = ()) -> None:
    """Records finished training episodes (actors that do not use the
    budget; budgeted actors send theirs with `lease_steps`)."""
    if len(returns):
      self._counter.increment(episodes=len(returns))
    self._record_returns(returns, lengths)

  def _record_returns(self, returns: Sequence[float],
                      lengths: Sequence[int]) -> None:
    with self._lock:
      self._stop.record_returns(returns)
    self._files.episodes(returns, list(lengths) or [0] * len(returns))
    if not self._stop.judge_evaluation and self._return_reached():
      self._wake.set()

  def _get_budget(self) -> counting.StepsBudget:
    with self._lock:
      if self._budget is None:  # Resumed runs continue from their count.
        counted = int(self._counter.get_counts().get('actor_steps', 0))
        self._budget = counting.StepsBudget(self._max_actor_steps, counted,
                                            lease_seconds=self._lease_seconds)
        self._holds = points.PointHolds(self._budget, counted,
                                        self._eval_every_steps)
      return self._budget

  def lease_steps(self, holder: str, used: int, wanted: int,
                  first: bool = False, returns: Sequence[float] = (),
                  lengths: Sequence[int] = ()) -> tuple:
    """Counts `used` actor steps of `holder` and the episodes they finished;
    grants it up to `wanted` more within the budget. Returns (granted,
    held): see `counting.StepsBudget.lease`. Once the run is finishing,
    (0, 0). Waits up to a second while an evaluation point holds the
    budget, so actors go on as soon as it is released."""
    budget = self._get_budget()
    # Counted before the budget hears of them: once it shows the last steps
    # used, the monitor may finish at once, and its results must hold them.
    counts = {'actor_steps': used} if used else {}
    if len(returns):
      counts['episodes'] = len(returns)
    if counts:
      self._counter.increment(**counts)
    if len(returns):
      self._record_returns(returns, lengths)
    granted, held = budget.lease(holder, used, wanted, first)
    if not granted and wanted and not self._finishing.is_set():
      if budget.wait_for_release(timeout=1.0):
        granted, held = budget.lease(holder, 0, wanted)
    if self._finishing.is_set():
      budget.lease(holder, 0, 0, first=True)  # Drops what it holds.
      granted, held = 0, 0
    if budget.exhausted():
      self._wake.set()
    return granted, held

  def acquire_steps(self, holder: str, used: int, wanted: int,
                    first: bool = False, *args: Sequence[Any]) -> int:
    """As `lease_steps`; returns the steps granted only."""
    return self.lease_steps(holder, used, wanted, first, *args)[0]

  def wait_for_evaluation_point(self, steps: int, timeout_s: float
                                ) -> Optional[Dict[str, Any]]:
    """Holds the budget at `steps` actor steps and waits up to `timeout_s`
    for them; returns the counts then (the budget stays held until
    `release_evaluation_point`), or None (call again to keep the hold)."""
    budget = self._get_budget()
    if self._finishing.is_set():  # No more points; no busy loop either.
      time.sleep(timeout_s)
      return None
    self._holds.hold(steps)
    if not budget.wait_for(steps, timeout_s):
      if int(self._counter.get_counts().get('actor_steps', 0)) < steps:
        return None  # (Actors that count without the budget: by the count.)
    return dict(self._counter.get_counts(), held=True)

  def release_evaluation_point(self, next_steps: Optional[int] = None
                               ) -> None:
    """Lets the actors go on past the evaluation point; with `next_steps`,
    as far as that next point, held while this evaluation runs (so a slow
    evaluation does not let them run past it)."""
    if self._holds is not None:
      self._holds.release(None if self._finishing.is_set() else next_steps)

  def record_evaluation(self, actor_steps: int, learner_steps: int,
                        evaluation: Mapping[str, Any],
                        final: bool = False) -> None:
    """Records an evaluation (`EvaluationResult.as_dict('eval')`) of the
    weights current at `actor_steps` (`final`: the last one, of the final
    weights). A periodic one's steps are counted as `evaluation_steps`."""
    if self._finishing.is_set() and not final:
      return  # An evaluation that ran past the end of the run.
    row = {'actor_steps': int(actor_steps),
           'learner_steps': int(learner_steps),
           'wall_seconds': time.time() - self._start}
    row.update(evaluation)
    if not final and row.get('eval_steps'):
      self._counter.increment(evaluation_steps=int(row['eval_steps']))
    with self._lock:
      self._evaluation = dict(row)
      if not final:
        self._stop.record_evaluation(
            row.get('eval_return_mean', float('nan')),
            row.get('eval_episodes') or 0)
    self._files.evaluation(row, final)
    if not final and self._stop.judge_evaluation and self._return_reached():
      self._wake.set()

  def summary(self) -> Dict[str, Any]:
    """The current statistics of the run (counts from the counter)."""
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
          'episodes': int(counts.get('episodes', 0)),
          'evaluation_steps': int(counts.get('evaluation_steps', 0)),
          'wall_seconds': wall,
          'actor_steps_per_second': actor_steps / max(wall, 1e-9),
          'episode_return_mean': self._stop.recent_mean(),
          'policy_lag_mean': lag_sum / lag_items if lag_items else float('nan'),
          'policy_lag_recent': ((lag_sum - last_sum) / (lag_items - last_items)
                                if lag_items > last_items else
                                self._recent_lag),
          'dropped_stale': int(counts.get('dropped_stale', 0)),
      }
      if lag_items > last_items:
        self._recent_lag = summary['policy_lag_recent']
    summary.update(progress_lib.table_summaries(self._replay))
    return summary

  def evaluation(self) -> Optional[Dict[str, Any]]:
    """The latest periodic evaluation (None before the first)."""
    with self._lock:
      return dict(self._evaluation) if self._evaluation else None

  def results(self) -> Optional[dict]:
    """The final results once the run is done, else None."""
    return self._results

  def run(self) -> None:
    stop = launch.stop_event()
    next_time = time.monotonic() + self._period
    share_steps = max(int(PROGRESS_SHARE * self._max_actor_steps), 1)
    next_steps = share_steps
    try:
      while not stop.is_set():
        self._wake.wait(min(self._period, CHECK_EVERY_SECONDS))
        self._wake.clear()
        if self._holds is not None:
          self._holds.drop_if_stale()
        steps = int(self._counter.get_counts().get('actor_steps', 0))
        if time.monotonic() >= next_time or steps >= next_steps:
          next_time = time.monotonic() + self._period
          next_steps = (steps // share_steps + 1) * share_steps
          self._progress_row()
        if self._done(steps):
          self.finish()
          launch.stop()
          return
    finally:
      self._files.close()

  def _progress_row(self) -> None:
    self._files.progress(self.summary())
    counts = self._counter.get_counts()
    self._last_lag = (float(counts.get('policy_lag_sum', 0.0)),
                      int(counts.get('policy_lag_items', 0)))

  def finish(self) -> dict:
    """Stops granting steps and the learner, evaluates the final weights and
    writes results.json (and counts.json) with the same counts."""
    self._finishing.set()
    if self._budget is not None:
      self._budget.release()
      self._budget.wait_settled(SETTLE_SECONDS)
    learner = self._halt_learner()
    summary = self.summary()
    self._files.progress(summary)  # Where the run ended: the last row.
    try:
      self._counter.checkpoint()  # counts.json: these counts.
    except Exception:  # pylint: disable=broad-except
      logging.info('The counter could not save its counts now.')
    result = self._final_evaluation()
    evaluation = result.as_dict('eval')
    self.record_evaluation(summary['actor_steps'], summary['learner_steps'],
                           evaluation, final=True)
    results = dict(self._metadata)
    results.update(summary)
    results.update(evaluation)
    results.update(learner, **self._files.final_metrics(summary))
    results['budget_steps_returned'] = (self._budget.returned if self._budget
                                        else 0)
    results['wall_seconds'] = time.time() - self._start
    path = os.path.join(self._logdir, 'results.json')
    text = json.dumps(progress_lib.jsonable(results), indent=2,
                      sort_keys=True)
    with open(path + '.tmp', 'w') as f:
      f.write(text)
    os.replace(path + '.tmp', path)  # Never a half-written results file.
    self._files.line(f'results: eval_return_mean='
                     f'{results["eval_return_mean"]:.3f} '
                     f'({progress_lib.evaluation_text(results)}); '
                     f'wrote {path}')
    self._results = results
    return results

  def _halt_learner(self) -> Dict[str, Any]:
    """Stops the learner stepping (its last counts arrive before this
    returns); {'learner_version': the version it serves} if it halts."""
    halt = getattr(self._variable_source, 'halt', None)
    if halt is None:
      return {}
    try:
      status = halt()
    except Exception:  # pylint: disable=broad-except
      logging.info('The learner did not halt (it has no halt()).')
      return {}
    return {'learner_version': int(status['version'])}

  def _final_evaluation(self) -> evaluator.EvaluationResult:
    max_steps = (None if self._eval_fraction is None else
                 max(int(self._eval_fraction * self._max_actor_steps), 1))
    logging.info('Evaluating the final weights over %d episodes (at most '
                 '%s steps).', self._eval_episodes, max_steps)
    actor = self._make_eval_actor(self._variable_source)
    actor.update(wait=True)
    return evaluator.evaluate(self._make_environment(), actor,
                              self._eval_episodes, max_steps=max_steps)

  def _done(self, actor_steps: Optional[int] = None) -> bool:
    """True once the budget is spent or the judged return is reached."""
    if self._budget is not None and self._budget.exhausted():
      return True
    if actor_steps is None:
      actor_steps = int(self._counter.get_counts().get('actor_steps', 0))
    # Actors that do not take their steps from the budget count directly.
    if actor_steps >= self._max_actor_steps:
      return True
    return self._return_reached()

  def _return_reached(self) -> bool:
    with self._lock:
      return self._stop.reached()
