"""The learner node every agent runs: one algorithm inside one host.

An algorithm keeps only what is its own: its update step, its state for
checkpoints and the variables its policy reads. The host does the rest, once
for every agent: it serves the versioned variables, resumes from and writes
checkpoints (`FaultTolerance` + `ModelStore`), rolls back after non-finite
updates, exports a policy snapshot when the program stops, counts through a
child `Counter` and logs.

    learner = LearnerHost(MyAlgorithm(...), counter=counter, logdir=logdir,
                          checkpoint=experiment.checkpoint,
                          checkpoint_dir=logdir + '/checkpoints')
    learner.run()     # until the program stops; get_variables meanwhile

The algorithm's side is `algorithm.py`, the serving and checkpoint side
`host_serving.py`; docs/protocols.md has the protocols.
`step(version)` gets the version the store serves (the behaviour policy's
version is compared with it for the policy lag) and returns within about a
second when no data comes, so that the host notices a stop.
"""

import os
import time
from typing import Any, Dict, Optional

from absl import logging

from repertory import launch
from repertory.components import checkpointing
from repertory.components import counting
from repertory.components.learners import host_serving
from repertory.components.learners.algorithm import Algorithm
from repertory.components.learners.algorithm import Update


class LearnerHost(host_serving.ServingHost):
  """Runs an `Algorithm`: serves, checkpoints, counts, logs, stops.

  Args:
    algorithm: the agent's `Algorithm`.
    counter: the run's `Counter` (or its handle); counts go through a child
      counter that sends them at most every `count_every_seconds`.
    logdir: where the learner's metrics go (None: terminal only).
    checkpoint, checkpoint_dir, snapshot_dir: see `ServingHost` (resume,
      checkpoints, rollback, the snapshot on stop).
    log_every: log the metrics every this many steps (and the first update
      this host makes, so that a run shows it has started learning).
    count_every_seconds: the child counter's time delta.
    train: False serves the initial variables and never steps.
    pull: True runs `algorithm.step(version)` in a loop (the algorithm reads
      its data); False leaves `run()` idle while actors push data through
      `update(...)` (A3C's gradients).
    one_version_per_step: every step publishes exactly one new version, also
      a non-finite one (its weights unchanged) unless it caused a rollback,
      whose republish is that step's (synchronous actors wait for it).
  """

  def __init__(self, algorithm: Algorithm, counter: Any = None,
               logdir: Optional[str] = None,
               checkpoint: Optional[checkpointing.CheckpointSettings] = None,
               checkpoint_dir: Optional[str] = None,
               snapshot_dir: Optional[str] = None,
               log_every: int = 1, count_every_seconds: float = 0.25,
               train: bool = True, pull: bool = True,
               one_version_per_step: bool = False):
    if not isinstance(log_every, int) or log_every < 1:
      raise ValueError(f'log_every must be a positive int, got {log_every!r}.')
    self._train, self._pull = train, pull
    self._one_version_per_step = one_version_per_step
    self._counter = (counting.Counter(counter, time_delta=count_every_seconds)
                     if counter is not None else None)
    from repertory.components import loggers  # pylint: disable=g-import-not-at-top
    self._logger = loggers.make_logger('learner', logdir=logdir,
                                       steps_key='learner/steps')
    self._log_every = log_every
    super().__init__(algorithm, checkpoint, checkpoint_dir, snapshot_dir)
    self._last_log = (time.monotonic(), self._steps)  # Resumed: not 0.
    self._logged = False  # The first update is logged whatever log_every.
    self._halted = False  # `halt()`: no more steps; serving goes on.

  @classmethod
  def in_logdir(cls, algorithm: Algorithm, logdir: Optional[str],
                snapshot: bool = True, **kwargs: Any) -> 'LearnerHost':
    """A host whose metrics go to `<logdir>/learner`, checkpoints to
    `<logdir>/checkpoints` and (with `snapshot`) the policy snapshot on stop
    to `<logdir>/snapshot`; `logdir` None: terminal only, no checkpoints.
    `kwargs` are the other arguments of `LearnerHost`."""
    path = lambda name: os.path.join(logdir, name) if logdir else None  # pylint: disable=g-long-lambda
    return cls(algorithm, logdir=path('learner'),
               checkpoint_dir=path('checkpoints'),
               snapshot_dir=path('snapshot') if snapshot else None, **kwargs)

  # --- stepping -------------------------------------------------------------

  def step(self) -> Optional[Dict[str, Any]]:
    """One algorithm step; returns its metrics (None if no update came or
    the final checkpoint is written). A push-based host (`pull=False`)
    returns its `status()` instead."""
    if not self._pull:
      return self.status()
    if self._halted:
      time.sleep(0.1)  # The run is finishing; the program stops soon.
      return None
    data = self._algorithm.fetch(self._store.version)
    return None if data is None else self.update(*data)

  def update(self, *data: Any) -> Optional[Dict[str, Any]]:
    """`algorithm.step(version, *data)`, one at a time, and what follows:
    publish, checkpoint or roll back, count, log. Actors of a push-based
    algorithm call it with their data (`pull=False`)."""
    with self._lock():  # One update at a time; none after the final save.
      if self._halted or (self._guard is not None and self._guard.stopped):
        time.sleep(0.1)  # The program is stopping; run() ends soon.
        return None
      update = self._algorithm.step(self._store.version, *data)
      if update is None:
        return None
      self._steps += 1
      self._publish(update)
    if self._counter is not None and update.counts:
      self._counter.increment(**update.counts)
    metrics = dict(update.metrics)
    metrics.update(self.status())
    if self._steps % self._log_every == 0 or not self._logged:
      self._logged = True
      now, (last_time, last_steps) = time.monotonic(), self._last_log
      metrics['learner/steps_per_second'] = (
          (self._steps - last_steps) / max(now - last_time, 1e-9))
      self._last_log = (now, self._steps)
      self._logger.write(metrics)
    return metrics

  def _publish(self, update: Update) -> None:
    variables = (update.variables if update.variables is not None
                 else self._algorithm.policy_variables)
    publish = lambda: self._store.publish(  # pylint: disable=g-long-lambda
        variables() if callable(variables) else variables)
    if update.applied:
      if update.publish:
        publish()
    elif update.applied is not None:
      self._nonfinite += 1
      if self._guard is None:
        logging.warning('Non-finite loss or gradient at step %d: update '
                        'skipped.', self._steps)
    rolled_back = (update.applied is not None and self._guard is not None and
                   self._guard.record_update(bool(update.applied),
                                             self._steps))
    if (self._one_version_per_step and update.applied is False and
        not rolled_back):
      publish()  # Unchanged weights, as the next version.

  def halt(self) -> Dict[str, int]:
    """Stops stepping (the run is finishing; weights are still served)
    and sends the last counts; returns {'learner_steps', 'version'} as
    they stay: what the run's results record."""
    with self._lock():  # After the update in progress, if any.
      self._halted = True
    self.flush_counts()
    return {'learner_steps': self._steps, 'version': self._store.version}

  def flush_counts(self) -> None:
    """Sends the counts not sent yet and waits until every count sent so far
    (also one a step is sending from another thread) has arrived."""
    if self._counter is not None:
      self._counter.flush()

  def flush(self) -> None:
    """`flush_counts()` and the algorithm's own `flush()`."""
    self.flush_counts()
    self._algorithm.flush()

  def run(self) -> None:
    """Steps until the program stops; then sends the last counts."""
    try:
      if not (self._train and self._pull):  # Serve; actors push, if any.
        launch.wait_for_stop()
        return
      launch.run_until_stop(self.step)
    finally:
      logging.info('Learner stopping after %d steps (version %d).',
                   self._steps, self.version)
      try:
        self.flush_counts()
      except Exception:  # pylint: disable=broad-except
        logging.info('The counter went away before the last counts.')
      self._algorithm.close()
      self._logger.close()
