"""Policy snapshots: a SavedModel holding only the acting function.

    export_policy(path, policy_fn, observation_spec, owner=network)
    policy = load_policy(path)          # no training code needed
    actions = policy.policy(observations)

For a recurrent policy pass `initial_state=network.initial_state`; the
snapshot then exposes `policy(observation, state) -> (action, state)` and
`initial_state(batch_size)`.
"""

from typing import Any, Callable, Optional

import dm_env
import numpy as np
import tensorflow as tf

from repertory import core


def _batched_signature(spec: Any) -> Any:
  return tf.nest.map_structure(
      lambda s: tf.TensorSpec((None,) + tuple(s.shape), tf.as_dtype(s.dtype)),
      spec)


class _Snapshot(tf.Module):
  """What is saved: the variables' owner and the traced acting functions."""

  def __init__(self, owner: tf.Module, policy_fn: Callable[..., Any],
               observation_spec: Any,
               initial_state: Optional[Callable[[int], Any]]):
    super().__init__(name='snapshot')
    self.owner = owner
    observations = _batched_signature(observation_spec)
    if initial_state is None:
      self.policy = tf.function(policy_fn, input_signature=[observations])
      self.recurrent = tf.Variable(False, trainable=False)
    else:
      state = tf.nest.map_structure(
          lambda t: tf.TensorSpec((None,) + tuple(t.shape[1:]), t.dtype),
          initial_state(1))
      self.policy = tf.function(policy_fn,
                                input_signature=[observations, state])
      self.initial_state = tf.function(
          initial_state, input_signature=[tf.TensorSpec((), tf.int32)])
      self.recurrent = tf.Variable(True, trainable=False)


def export_policy(path: str, policy_fn: Callable[..., Any],
                  observation_spec: Any, owner: tf.Module,
                  initial_state: Optional[Callable[[int], Any]] = None) -> str:
  """Saves `policy_fn` (batched observations -> actions) as a SavedModel.

  Args:
    path: the SavedModel directory to write.
    policy_fn: `observations [B, ...] -> actions [B]`, or for recurrent
      policies `(observations, state) -> (actions, state)`.
    observation_spec: the environment's observation spec (unbatched).
    owner: a module that owns every variable `policy_fn` reads.
    initial_state: for recurrent policies, `batch_size -> state`.
  """
  snapshot = _Snapshot(owner, policy_fn, observation_spec, initial_state)
  tmp = path.rstrip('/') + '.tmp'
  tf.saved_model.save(snapshot, tmp)
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)
  tf.io.gfile.rename(tmp, path)  # A half-written snapshot is never loaded.
  return path


def load_policy(path: str) -> Any:
  """Loads a snapshot written by `export_policy`."""
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'No policy snapshot at {path!r}.')
  return tf.saved_model.load(path)


class SnapshotActor(core.Actor):
  """Acts in one (unbatched) environment with a loaded snapshot."""

  def __init__(self, snapshot: Any):
    self._snapshot = snapshot
    self._recurrent = bool(snapshot.recurrent.numpy())
    self._state = None

  def select_action(self, observation: Any) -> Any:
    batched = tf.nest.map_structure(lambda x: np.asarray(x)[None], observation)
    if self._recurrent:
      action, self._state = self._snapshot.policy(batched, self._state)
    else:
      action = self._snapshot.policy(batched)
    return tf.nest.map_structure(lambda a: a.numpy()[0], action)

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    if self._recurrent:
      self._state = self._snapshot.initial_state(tf.constant(1))

  def observe(self, action: Any, next_timestep: dm_env.TimeStep) -> None:
    pass

  def update(self, wait: bool = False) -> None:
    pass  # A snapshot's weights are fixed.
