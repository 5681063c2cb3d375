"""The learner node every agent runs: one algorithm inside one host.

An algorithm keeps only what is its own: its update step, its state for
checkpoints and the variables its policy reads. The host does the rest, once
for every agent: it serves the versioned variables, resumes from and writes
checkpoints (`FaultTolerance` + `ModelStore`), rolls back after non-finite
updates, exports a policy snapshot when the program stops, counts through a
child `Counter` and logs.

    class MyAlgorithm(learners.Algorithm):
      def step(self, version):             # one update; None: no data yet
        ...
        return learners.Update(metrics={'losses/total': loss},
                               counts={'learner_steps': 1})
      def policy_variables(self):          # what actors fetch
        return {'policy': networks.get_variables(self.network)}
      def save(self):                      # the trackables to checkpoint
        return {'network': self.network, 'optimizer': self.optimizer}

    learner = LearnerHost(MyAlgorithm(...), counter=counter, logdir=logdir,
                          checkpoint=experiment.checkpoint,
                          checkpoint_dir=logdir + '/checkpoints')
    learner.run()     # until the program stops; get_variables meanwhile

`step(version)` gets the version the store serves (the behaviour policy's
version is compared with it for the policy lag) and returns within about a
second when no data comes, so that the host notices a stop.
"""

import threading
import time
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Sequence

from absl import logging

from repertory import core
from repertory import launch
from repertory.components import checkpointing
from repertory.components import counting
from repertory.components.learners import fault_tolerance
from repertory.components.model_store import store as store_lib
from repertory.components.variables import store as variables_lib


class Update(NamedTuple):
  """What one algorithm step returns to its host.

  Attributes:
    metrics: logged as they are (namespaced keys: 'losses/...', 'charts/...').
    counts: added to the run's counter ('learner_steps', 'policy_lag_sum',
      'policy_lag_items', 'dropped_stale' are read by the monitor).
    applied: True if new weights came out of the step (they are published);
      False if an update was attempted and was not finite (the host counts it
      and rolls back after `max_bad_updates` in a row); None if no update was
      attempted (e.g. every item was too stale).
    variables: the groups to publish when `applied`, if the step already has
      them as numpy (None: the host calls `policy_variables()`).
    publish: False keeps an applied update's weights unpublished for now
      (R2D2 publishes every `learner_steps_per_publish` steps).
  """
  metrics: Mapping[str, Any]
  counts: Mapping[str, float] = {}
  applied: Optional[bool] = True
  variables: Optional[Mapping[str, core.Nest]] = None
  publish: bool = True


class Algorithm(core.Saveable):
  """The part of a learner that is the agent's own."""

  def fetch(self, version: int) -> Optional[tuple]:  # pylint: disable=unused-argument
    """Waits for the next step's data (e.g. a batch) outside the host's
    lock, so a stop is never held up by it; returns the arguments for
    `step` after the version, or None if none came (within ~1 s). The
    default, (), lets `step` read its data itself."""
    return ()

  def step(self, version: int, *data: Any) -> Optional[Update]:
    """One update at policy `version` (on `data` when actors push it);
    None if no data came (within ~1 s)."""
    raise NotImplementedError

  def policy_variables(self) -> Mapping[str, core.Nest]:
    """The variable groups actors read, as numpy: {'policy': weights}."""
    raise NotImplementedError

  def save(self) -> Mapping[str, Any]:
    """The trackables to checkpoint by name (networks, optimizers)."""
    raise NotImplementedError

  def restore(self, state: Any) -> None:
    """Checkpoints restore into `save()`'s trackables in place."""

  def export_snapshot(self, path: str) -> str:  # pylint: disable=unused-argument
    """Exports the greedy policy as a SavedModel; returns its path."""
    raise NotImplementedError(f'{type(self).__name__} exports no snapshot.')

  def flush(self) -> None:
    """Waits until the algorithm's asynchronous writes (e.g. priorities)
    reached their destination."""

  def close(self) -> None:
    """Called once when the host's `run()` ends."""


class LearnerHost(core.Learner):
  """Runs an `Algorithm`: serves, checkpoints, counts, logs, stops.

  Args:
    algorithm: the agent's `Algorithm`.
    counter: the run's `Counter` (or its handle); counts go through a child
      counter that sends them at most every `count_every_seconds`.
    logdir: where the learner's metrics go (None: terminal only).
    checkpoint: the experiment's `CheckpointSettings`.
    checkpoint_dir: if set, resume from the latest checkpoint there, write
      checkpoints per `checkpoint`, roll back after non-finite updates and
      write a final checkpoint when the program stops.
    snapshot_dir: if set, export the algorithm's policy snapshot there when
      the program stops (after the final checkpoint).
    log_every: log the metrics every this many steps.
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
               log_every: int = 1, count_every_seconds: float = 1.0,
               train: bool = True, pull: bool = True,
               one_version_per_step: bool = False,
               make_logger: Optional[Callable[..., Any]] = None):
    if not isinstance(log_every, int) or log_every < 1:
      raise ValueError(f'log_every must be a positive int, got {log_every!r}.')
    self._algorithm = algorithm
    self._train, self._pull = train, pull
    self._one_version_per_step = one_version_per_step
    self._store = variables_lib.VariableStore(algorithm.policy_variables())
    self._counter = (counting.Counter(counter, time_delta=count_every_seconds)
                     if counter is not None else None)
    if make_logger is None:
      from repertory.components import loggers  # pylint: disable=g-import-not-at-top
      make_logger = loggers.make_logger
    self._logger = make_logger('learner', logdir=logdir)
    self._log_every = log_every
    self._steps = 0
    self._last_log = (time.monotonic(), 0)
    self._snapshot_dir = snapshot_dir
    self._guard = None
    self._nonfinite = 0
    self._plain_lock = threading.RLock()  # Without a guard (no checkpoints).
    if checkpoint_dir is not None:
      settings = checkpoint or checkpointing.CheckpointSettings()
      self._guard = fault_tolerance.FaultTolerance(
          store_lib.ModelStore(
              checkpoint_dir, algorithm.save(), max_to_keep=settings.to_keep,
              checkpoint_every_steps=settings.every_steps,
              checkpoint_every_minutes=settings.every_minutes),
          self._store, algorithm.policy_variables,
          max_bad_updates=settings.max_bad_updates)
      restored = self._guard.resume()
      if restored is not None:
        self._steps = restored.step
        algorithm.restore(restored)
    if snapshot_dir is not None and launch.get_launch_type() is not None:
      # After the guard's final checkpoint (stop handlers run in order).
      launch.register_stop_handler(self._final_snapshot)

  # --- VariableSource -------------------------------------------------------

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def variables_channel_address(self) -> str:
    """`get_variables` over TCP (`VariableClient(transport='tcp')`)."""
    return self._store.variables_channel_address()

  def wait_for_version(self, version: int, timeout_s: float = 2.0) -> int:
    """Blocks up to `timeout_s` until `version` is published; returns the
    version served then (smaller than `version` on timeout)."""
    try:
      return self._store.wait_for_version(version, timeout_s)
    except TimeoutError:
      return self._store.version

  @property
  def version(self) -> int:
    return self._store.version

  @property
  def steps(self) -> int:
    return self._steps

  @property
  def algorithm(self) -> Algorithm:
    return self._algorithm

  @property
  def guard(self) -> Optional[fault_tolerance.FaultTolerance]:
    return self._guard

  # --- checkpoints and snapshots --------------------------------------------

  def rollback(self, version: Optional[int] = None,
               tag: Optional[str] = None) -> int:
    """Restores checkpoint `version` (or `tag`; default: the latest) and
    republishes its weights as a new, higher version, which it returns."""
    if self._guard is None:
      raise ValueError('rollback() needs a learner built with checkpoint_dir.')
    return self._guard.rollback(version=version, tag=tag)

  def export_snapshot(self, path: str) -> str:
    """Exports the greedy policy as a SavedModel (`repertory.evaluate`)."""
    with self._lock():
      return self._algorithm.export_snapshot(path)

  def _final_snapshot(self) -> None:
    try:
      logging.info('Policy snapshot exported to %s.',
                   self.export_snapshot(self._snapshot_dir))
    except Exception:  # pylint: disable=broad-except
      logging.exception('Exporting the policy snapshot failed.')

  def _lock(self):
    return self._guard.lock if self._guard else self._plain_lock

  # --- stepping -------------------------------------------------------------

  def step(self) -> Optional[Dict[str, Any]]:
    """One algorithm step; returns its metrics (None if no update came or
    the final checkpoint is written). A push-based host (`pull=False`)
    returns its `status()` instead."""
    if not self._pull:
      return self.status()
    data = self._algorithm.fetch(self._store.version)
    return None if data is None else self.update(*data)

  def status(self) -> Dict[str, Any]:
    """Steps, version, skipped updates and rollbacks so far."""
    status = {'learner/steps': self._steps,
              'learner/version': self._store.version,
              'learner/nonfinite_updates': self._nonfinite}
    if self._guard is not None:
      status['learner/rollbacks'] = self._guard.rollbacks
    return status

  def update(self, *data: Any) -> Optional[Dict[str, Any]]:
    """`algorithm.step(version, *data)`, one at a time, and what follows:
    publish, checkpoint or roll back, count, log. Actors of a push-based
    algorithm call it with their data (`pull=False`)."""
    with self._lock():  # One update at a time; none after the final save.
      if self._guard is not None and self._guard.stopped:
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
    if self._steps % self._log_every == 0:
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
    if update.applied and update.publish:
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
