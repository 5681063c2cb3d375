"""The learner's side of fault tolerance: resume, checkpoints, rollback.

    store = variables.VariableStore({'policy': weights()})
    guard = FaultTolerance(
        model_store.ModelStore(logdir + '/checkpoints',
                               {'network': net, 'optimizer': opt},
                               checkpoint_every_steps=1000),
        store, lambda: {'policy': weights()}, max_bad_updates=10)
    restored = guard.resume()          # continue version and steps, if any
    steps = restored.step if restored else 0
    ...
    with guard.lock:                   # in step(): one update at a time
      applied = bool(sgd_step(batch)['applied'])   # apply_if_finite inside
      if applied:
        store.publish({'policy': weights()})
      guard.record_update(applied, steps)   # checkpoints; rolls back if bad

- `resume()` restores the latest checkpoint (network, optimizer, step,
  version) and makes the variable store serve it under its saved version, so
  versions continue across restarts; with none on disk it writes the initial
  state as the first checkpoint (there is always one to roll back to). If
  the latest checkpoint is unreadable, the model store falls back to the
  newest readable one (setting the others aside) and its weights are served
  and checkpointed under a version above every one ever written; if none is
  readable, `resume()` raises `model_store.CheckpointError` and nothing on
  disk changes.
- `record_update(applied, step)` saves every `checkpoint_every_*` of the model
  store; after `max_bad_updates` non-finite updates in a row it rolls back to
  the newest finite weights: the skipped updates left the weights as they
  were, so when those are finite they are checkpointed and kept; only
  weights that are not finite go back to the latest checkpoint (which holds
  finite weights: no other is written). Never further back than that.
- `rollback(version | tag)` restores a checkpoint (by default the newest
  finite weights, as above) and republishes its weights as a new, higher
  version (actors and inference servers pick them up like any update; the
  version never goes back), then checkpoints that version.
- With `keep_initial`, a fresh start's first checkpoint is also tagged
  `INITIAL_TAG`; `restart()` restores it (the state as built) and
  republishes it as a new version, as a rollback does.
- Inside a launched program, a stop handler writes a final checkpoint when
  the program stops (Ctrl-C, SIGTERM, `launch.stop()`). It is registered by
  a successful `resume()`, never before: a learner whose resume failed must
  not write its fresh weights over the run's checkpoints on the way out.
  Nothing is checkpointed before `resume()`.
"""

from typing import Callable, Dict, Mapping, Optional, Tuple

from absl import logging

from repertory import core
from repertory import launch
from repertory.components import variables as variables_lib
from repertory.components.learners import checkpoint_writer
from repertory.components.model_store import store as store_lib

INITIAL_TAG = 'initial'  # The state as built (`keep_initial`).


class FaultTolerance(checkpoint_writer.CheckpointWriter):
  """Resumes, checkpoints, skips non-finite updates and rolls back.

  Args:
    model_store, variable_store, get_variables: see `CheckpointWriter`.
    max_bad_updates: roll back after this many non-finite updates in a row.
    final_checkpoint_on_stop: inside a launched program, register a stop
      handler that writes a final checkpoint (at the end of a successful
      `resume()`).
    keep_initial: tag a fresh start's first checkpoint `INITIAL_TAG`.
  """

  def __init__(self, model_store: store_lib.ModelStore,
               variable_store: variables_lib.VariableStore,
               get_variables: Callable[[], Mapping[str, core.Nest]],
               max_bad_updates: int = 10,
               final_checkpoint_on_stop: bool = True,
               keep_initial: bool = False):
    if not isinstance(max_bad_updates, int) or max_bad_updates < 1:
      raise ValueError('max_bad_updates must be a positive int, got '
                       f'{max_bad_updates!r}.')
    super().__init__(model_store, variable_store, get_variables)
    self._max_bad_updates = max_bad_updates
    self.consecutive_bad = 0
    self.total_bad = 0
    self.rollbacks = 0
    self._final_checkpoint_on_stop = final_checkpoint_on_stop
    self._keep_initial = keep_initial

  def resume(self) -> Optional[store_lib.Restored]:
    """Restores the latest readable checkpoint, if any; else checkpoints the
    start. Then (inside a launched program) registers the final checkpoint.

    Returns the restored (version, step, path) as saved on disk, or None for
    a fresh start. After a fall back past unreadable checkpoints the store
    serves the weights under a higher version than `restored.version`.

    Raises:
      model_store.CheckpointError: no checkpoint on disk is readable; the
        directory is left as it was and no stop handler is registered.
    """
    with self.lock:
      restored = self._model_store.restore()
      self._resumed = True
      if restored is None:
        self._save(self.step)
        if self._keep_initial:
          self._model_store.tag(self.version, INITIAL_TAG)
      else:
        # Versions continue from the checkpoint's (publish only counts up);
        # past any newer checkpoint that was set aside as unreadable.
        highest = self._model_store.highest_version()
        version = restored.version
        if highest is not None and highest > version:
          version = highest + 1
        self._variable_store.reset(self._get_variables(), version)
        self.step = restored.step
        self._saved_version = restored.version
        logging.info('Resumed at version %d, step %d from %s.',
                     restored.version, restored.step, restored.path)
        if version != restored.version:
          logging.warning(
              'Fell back to version %d: newer checkpoints up to version %d '
              'were unreadable; serving its weights as version %d.',
              restored.version, highest, version)
          self._save(self.step)
      if self._final_checkpoint_on_stop and launch.get_launch_type():
        launch.register_stop_handler(self.final_checkpoint)
      return restored

  def record_update(self, applied: bool, step: int) -> bool:
    """Counts one update (after its publish); True if it caused a rollback.

    Args:
      applied: whether the update was finite and applied.
      step: the learner's step counter after this update.
    """
    with self.lock:
      self.step = step
      if applied:
        self.consecutive_bad = 0
        if self._model_store.maybe_save(self.version, step) is not None:
          self._saved_version = self.version
        return False
      self.consecutive_bad += 1
      self.total_bad += 1
      logging.warning(
          'Non-finite loss or gradient at step %d: update skipped (%d in a '
          'row, %d in all; rollback after %d).', step, self.consecutive_bad,
          self.total_bad, self._max_bad_updates)
      if self.consecutive_bad < self._max_bad_updates:
        return False
      logging.error('%d non-finite updates in a row: rolling back to the '
                    'newest finite weights.', self.consecutive_bad)
      self.rollback()
      return True

  def rollback(self, version: Optional[int] = None,
               tag: Optional[str] = None) -> int:
    """Restores a checkpoint and republishes its weights.

    By default the newest finite weights: the current ones if finite (they
    are checkpointed first; the optimizer's state comes back with them),
    else the latest checkpoint. The restored weights are published as a new,
    higher version (so every reader fetches them) and checkpointed under it.
    Returns that version.
    """
    with self.lock:
      if version is None and tag is None:
        self.checkpoint()  # Only finite weights are written.
      restored, new_version = self._republish(version, tag)
      self.rollbacks += 1
      logging.warning('Rolled back to version %d (step %d); republished as '
                      'version %d.', restored.version, restored.step,
                      new_version)
      return new_version

  def restart(self) -> int:
    """Restores the state as built (the checkpoint tagged `INITIAL_TAG`:
    `keep_initial`) and republishes it as a new, higher version, which it
    returns; the step count goes on."""
    with self.lock:
      if INITIAL_TAG not in self._model_store.tags():
        raise ValueError(
            f'No checkpoint tagged {INITIAL_TAG!r} in '
            f'{self._model_store.directory}: restarting needs a learner '
            'started with CheckpointSettings(keep_initial=True).')
      _, new_version = self._republish(None, INITIAL_TAG)
      logging.info('Restarted from the initial state as version %d (step '
                   '%d).', new_version, self.step)
      return new_version

  def _republish(self, version: Optional[int], tag: Optional[str]
                 ) -> Tuple[store_lib.Restored, int]:
    """Restores a checkpoint, publishes its weights as a new version and
    checkpoints them under it."""
    restored = self._model_store.restore(version=version, tag=tag)
    if restored is None:
      raise RuntimeError('Cannot roll back: no checkpoint in '
                         f'{self._model_store.directory}.')
    new_version = self._variable_store.publish(self._get_variables())
    self.consecutive_bad = 0
    self._save(self.step)
    return restored, new_version

  def metrics(self) -> Dict[str, float]:
    return {'learner/nonfinite_updates': self.total_bad,
            'learner/rollbacks': self.rollbacks}
