"""The variable and checkpoint side of `LearnerHost` (host.py has the run
loop, the publishing, the counting and the logging).

`ServingHost` serves the algorithm's versioned policy variables (also over
TCP), resumes from and writes checkpoints (`FaultTolerance` + `ModelStore`),
rolls back, and exports the policy snapshot when the program stops.
"""

import threading
from typing import Any, Dict, Optional, Sequence

from absl import logging

from repertory import core
from repertory import launch
from repertory.components import checkpointing
from repertory.components.learners import fault_tolerance
from repertory.components.learners.algorithm import Algorithm
from repertory.components.model_store import store as store_lib
from repertory.components.variables import store as variables_lib


class ServingHost(core.Learner):
  """Serves an `Algorithm`'s variables and keeps its checkpoints.

  Args:
    algorithm: the agent's `Algorithm`.
    checkpoint: the experiment's `CheckpointSettings`.
    checkpoint_dir: if set, resume from the latest checkpoint there, write
      checkpoints per `checkpoint`, roll back after non-finite updates and
      write a final checkpoint when the program stops.
    snapshot_dir: if set, export the algorithm's policy snapshot there when
      the program stops (after the final checkpoint).
  """

  def __init__(self, algorithm: Algorithm,
               checkpoint: Optional[checkpointing.CheckpointSettings] = None,
               checkpoint_dir: Optional[str] = None,
               snapshot_dir: Optional[str] = None):
    self._algorithm = algorithm
    self._store = variables_lib.VariableStore(algorithm.policy_variables())
    self._steps = 0
    self._nonfinite = 0
    self._snapshot_dir = snapshot_dir
    self._guard = None
    self._plain_lock = threading.RLock()  # Without a guard (no checkpoints).
    if checkpoint_dir is not None:
      settings = checkpoint or checkpointing.CheckpointSettings()
      self._guard = fault_tolerance.FaultTolerance(
          store_lib.ModelStore(
              checkpoint_dir, algorithm.save(), max_to_keep=settings.to_keep,
              checkpoint_every_steps=settings.every_steps,
              checkpoint_every_minutes=settings.every_minutes),
          self._store, algorithm.policy_variables,
          max_bad_updates=settings.max_bad_updates,
          keep_initial=settings.keep_initial)
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

  def status(self) -> Dict[str, Any]:
    """Steps, version, skipped updates and rollbacks so far."""
    status = {'learner/steps': self._steps,
              'learner/version': self._store.version,
              'learner/nonfinite_updates': self._nonfinite}
    if self._guard is not None:
      status['learner/rollbacks'] = self._guard.rollbacks
    return status

  # --- checkpoints and snapshots --------------------------------------------

  def rollback(self, version: Optional[int] = None,
               tag: Optional[str] = None) -> int:
    """Restores checkpoint `version` (or `tag`; default: the latest) and
    republishes its weights as a new, higher version, which it returns."""
    if self._guard is None:
      raise ValueError('rollback() needs a learner built with checkpoint_dir.')
    return self._guard.rollback(version=version, tag=tag)

  def reset(self) -> int:
    """Restarts from the algorithm's state as built (network, optimizer:
    its first checkpoint, kept with `CheckpointSettings.keep_initial`) and
    publishes it as a new, higher version, which it returns; the step count
    goes on (a league's main exploiter at the end of a generation)."""
    if self._guard is None:
      raise ValueError('reset() needs a learner built with checkpoint_dir.')
    return self._guard.restart()

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
