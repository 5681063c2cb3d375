"""The layout of `UnrollAdder` items, as a table and a learner see it: the
table signature (`unroll_signature`) and a sampled batch split into
time-major transitions (`time_major_transitions`, `UnrollTransitions`).

The item layout itself is described in `unroll.py`.
"""

from typing import Any, NamedTuple, Optional

import dm_env
import tree

from repertory.components.adders import base


def unroll_signature(environment_spec,
                     unroll_length: int,
                     extras_spec=(),
                     core_state_spec=None,
                     envs_per_item: Optional[int] = None):
  """The table signature of `UnrollAdder` items.

  Args:
    environment_spec: `EnvironmentSpec` of ONE environment (or a dm_env).
    unroll_length: T; items have T + 1 steps.
    extras_spec: nest of specs (or example arrays) of one env's extras.
    core_state_spec: nest of specs of one env's recurrent state, or None.
    envs_per_item: None for one environment's unroll per item; N for
      `UnrollAdder(batched_items=True)` with `num_envs=N` (every field gets
      a leading [N]).
  """
  if unroll_length < 1:
    raise ValueError(f'unroll_length must be >= 1, got {unroll_length}.')
  if envs_per_item is not None and envs_per_item < 1:
    raise ValueError(f'envs_per_item must be >= 1 or None, got '
                     f'{envs_per_item}.')
  signature = base.step_signature(environment_spec, extras_spec,
                                  core_state_spec,
                                  time_prefix=(unroll_length + 1,))
  if envs_per_item is None:
    return signature
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tree.map_structure(
      lambda s: tf.TensorSpec((envs_per_item,) + tuple(s.shape), s.dtype,
                              s.name), signature)


class UnrollTransitions(NamedTuple):
  """A batch of unrolls, time-major, as the T transitions a learner uses.

  Attributes:
    observation: [T + 1, B, ...] nest, o_0 .. o_T (o_T only bootstraps).
    action: [T, B, ...] nest, a_t taken on o_t.
    extras: [T, B, ...] nest, the actor's other outputs on o_t.
    reward: [T, B], the reward of transition t -> t+1 (0 where masked).
    discount: [T, B], its environment discount (0 where masked).
    mask: [T, B] float32, 0 where o_{t+1} is FIRST: the batched environment
      reset there and ignored a_t, so t -> t+1 is no transition.
    first: [T + 1, B] bool, where each episode starts (recurrent unrolls).
  """
  observation: Any
  action: Any
  extras: Any
  reward: Any
  discount: Any
  mask: Any
  first: Any


def time_major_transitions(data) -> UnrollTransitions:
  """Splits a batch of `UnrollAdder` items (`[B, T + 1, ...]`, e.g. a
  `reverb.ReplaySample`'s `data`) into time-major transitions (TensorFlow;
  works inside a `tf.function`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def time_major(x):  # [B, T + 1, ...] -> [T + 1, B, ...]
    x = tf.convert_to_tensor(x)
    return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))

  first = tf.equal(time_major(data['step_type']),
                   int(dm_env.StepType.FIRST))                  # [T + 1, B]
  mask = 1.0 - tf.cast(first[1:], tf.float32)                   # [T, B]
  before_last = lambda x: time_major(x)[:-1]
  return UnrollTransitions(
      observation=tree.map_structure(time_major, data['observation']),
      action=tree.map_structure(before_last, data['action']),
      extras=tree.map_structure(before_last, data.get('extras', ())),
      reward=mask * tf.cast(time_major(data['reward'])[1:], tf.float32),
      discount=mask * tf.cast(time_major(data['discount'])[1:], tf.float32),
      mask=mask, first=first)
