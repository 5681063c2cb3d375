"""Shared result type and input checks for the losses in this package.

Every loss takes tensors laid out time-major, `[T, B, ...]` (T unroll steps,
B sequences), unless its docstring says otherwise, casts float inputs to
float32, and checks the shapes of its inputs before computing anything.
"""

from typing import Dict, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf


class LossOutput(NamedTuple):
  """A scalar loss to minimise and the per-term metrics behind it.

  Attributes:
    loss: scalar tensor; the total loss (already weighted).
    extra: name -> tensor; per-term metrics (unweighted terms, means of
      intermediate quantities) for logging, e.g. `'policy_loss'`.
  """
  loss: tf.Tensor
  extra: Dict[str, tf.Tensor]


def to_float(x, name: str) -> tf.Tensor:
  """Converts `x` (tensor, array, number) to a float32 tensor."""
  del name  # Kept for call-site readability.
  x = tf.convert_to_tensor(x)
  if x.dtype != tf.float32:
    x = tf.cast(x, tf.float32)
  return x


def check_rank(x: tf.Tensor, name: str, ranks: Sequence[int], fn: str) -> None:
  """Raises ValueError unless `x` has one of `ranks` (when known)."""
  if x.shape.rank is not None and x.shape.rank not in ranks:
    raise ValueError(
        f'{fn}: {name} must have rank {" or ".join(map(str, ranks))}, got '
        f'shape {x.shape.as_list()}.')


def check_same_shape(fn: str, **tensors: tf.Tensor) -> None:
  """Raises ValueError naming every tensor whose shape differs from the first.

  Args:
    fn: name of the calling function, for the message.
    **tensors: name -> tensor; all must have the same (static) shape.
  """
  items = list(tensors.items())
  first_name, first = items[0]
  bad = [(n, t) for n, t in items[1:]
         if not t.shape.is_compatible_with(first.shape)]
  if bad:
    shapes = ', '.join(f'{n}: {t.shape.as_list()}' for n, t in items)
    raise ValueError(
        f'{fn}: inputs must share one shape ({first_name}\'s '
        f'{first.shape.as_list()}), but '
        f'{", ".join(n for n, _ in bad)} differ(s). Shapes: {shapes}.')


def check_shape(fn: str, name: str, x: tf.Tensor, expected: tf.TensorShape,
                why: str) -> None:
  """Raises ValueError if `x`'s shape is incompatible with `expected`."""
  if not x.shape.is_compatible_with(expected):
    raise ValueError(
        f'{fn}: {name} has shape {x.shape.as_list()}, expected '
        f'{tf.TensorShape(expected).as_list()} ({why}).')


def check_threshold(fn: str, name: str, value: Optional[float]) -> None:
  """Raises ValueError unless `value` is None or a positive number."""
  if value is not None and not value > 0:
    raise ValueError(f'{fn}: {name} must be None (no clipping) or > 0, '
                     f'got {value!r}.')


def check_unit_interval(fn: str, name: str, value: float) -> None:
  """Raises ValueError unless 0 <= value <= 1."""
  if not 0.0 <= value <= 1.0:
    raise ValueError(f'{fn}: {name} must be in [0, 1], got {value!r}.')


def categorical_log_prob(logits: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
  """log softmax(logits)[actions]; logits `[..., A]`, actions `[...]` ints."""
  logits = tf.convert_to_tensor(logits)
  actions = tf.convert_to_tensor(actions)
  check_shape('categorical_log_prob', 'actions', actions, logits.shape[:-1],
              'logits without the action dimension')
  return -tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(actions, tf.int32), logits=logits)


def categorical_entropy(logits: tf.Tensor) -> tf.Tensor:
  """Entropy of softmax(logits) over the last axis; returns `[...]`."""
  log_p = tf.nn.log_softmax(logits)
  return -tf.reduce_sum(tf.exp(log_p) * log_p, axis=-1)


def next_values(v_tm1: tf.Tensor, bootstrap_value: tf.Tensor) -> tf.Tensor:
  """Returns v_t = [v_tm1[1:], bootstrap_value]: values of the next states."""
  return tf.concat([v_tm1[1:], bootstrap_value[tf.newaxis]], axis=0)


def gaussian_log_prob(mean: tf.Tensor, stddev: tf.Tensor,
                      actions: tf.Tensor) -> tf.Tensor:
  """log N(actions; mean, diag(stddev²)), summed over the last axis.

  All inputs `[..., action_size]`; returns `[...]`.
  """
  mean = to_float(mean, 'mean')
  stddev = to_float(stddev, 'stddev')
  actions = to_float(actions, 'actions')
  check_same_shape('gaussian_log_prob', mean=mean, stddev=stddev,
                   actions=actions)
  z = (actions - mean) / stddev
  log_density = -0.5 * tf.square(z) - tf.math.log(stddev) - 0.5 * tf.math.log(
      2.0 * np.pi)
  return tf.reduce_sum(log_density, axis=-1)


def gaussian_entropy(stddev: tf.Tensor) -> tf.Tensor:
  """Entropy of a diagonal Gaussian, summed over the last axis; `[...]`."""
  stddev = to_float(stddev, 'stddev')
  return tf.reduce_sum(
      0.5 + 0.5 * tf.math.log(2.0 * np.pi) + tf.math.log(stddev), axis=-1)
