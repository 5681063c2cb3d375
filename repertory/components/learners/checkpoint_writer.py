"""The checkpoint-writing half of `FaultTolerance` (fault_tolerance.py has
resume, the count of bad updates and rollback): the lock one update holds,
checkpoints of finite weights only, the final checkpoint on stop, and no
save before `resume()` or after the final one."""

import threading
from typing import Any, Callable, Mapping, Optional

from absl import logging
import numpy as np
import tree

from repertory import core
from repertory.components import variables as variables_lib
from repertory.components.model_store import store as store_lib


def _is_finite(nest: Any) -> bool:
  return all(np.all(np.isfinite(x)) for x in tree.flatten(nest)
             if np.issubdtype(np.asarray(x).dtype, np.floating))


class CheckpointWriter:
  """Writes a learner's checkpoints under one lock.

  Args:
    model_store: where checkpoints go; it holds the network and optimizer.
    variable_store: the learner's `VariableStore` (what actors read).
    get_variables: returns the groups to publish, e.g. `{'policy': weights}`.
  """

  def __init__(self, model_store: store_lib.ModelStore,
               variable_store: variables_lib.VariableStore,
               get_variables: Callable[[], Mapping[str, core.Nest]]):
    self._model_store = model_store
    self._variable_store = variable_store
    self._get_variables = get_variables
    self.lock = threading.RLock()  # Held around one update and its publish.
    self.step = 0                  # The learner's step, as last recorded.
    self._saved_version: Optional[int] = None
    self._stopped = False
    self._resumed = False

  @property
  def model_store(self) -> store_lib.ModelStore:
    return self._model_store

  @property
  def version(self) -> int:
    return self._variable_store.version

  @property
  def stopped(self) -> bool:
    """True once the final checkpoint is written: make no more updates
    (check it under `lock`, so that none is lost after that checkpoint)."""
    return self._stopped

  @property
  def resumed(self) -> bool:
    """True once `resume()` succeeded (checkpoints may be written)."""
    return self._resumed

  def checkpoint(self) -> Optional[str]:
    """Writes a checkpoint of the current state now (if its weights are
    finite and its version is not on disk yet)."""
    with self.lock:
      if self._saved_version == self.version:
        return None
      return self._save(self.step)

  def final_checkpoint(self) -> Optional[str]:
    """The stop handler: a last checkpoint, then no more saves."""
    with self.lock:
      if self._stopped:
        return None
      path = self.checkpoint()
      self._stopped = True
      logging.info('Final checkpoint at version %d, step %d: %s.',
                   self.version, self.step, path or 'already on disk')
      return path

  def _save(self, step: int) -> Optional[str]:
    if self._stopped:
      return None
    if not self._resumed:
      raise RuntimeError('FaultTolerance: call resume() before the first '
                         'update or checkpoint (a save before it could move '
                         'the latest checkpoint back).')
    if not _is_finite(self._get_variables()):
      logging.error('Not checkpointing version %d: its weights are not '
                    'finite.', self.version)
      return None
    path = self._model_store.save(self.version, step)
    self._saved_version = self.version
    return path
