"""Apply a module to inputs with any number of leading (batch, time) dims."""

from typing import Callable

import tensorflow as tf


def apply_over_leading_dims(fn: Callable[[tf.Tensor], tf.Tensor],
                            x: tf.Tensor, event_rank: int) -> tf.Tensor:
  """Applies `fn` (which takes `[N, *event]`) to `x` of shape `[..., *event]`.

  The leading dimensions (e.g. `[B]` when acting, `[T, B]` when learning) are
  merged into one before `fn` and split again after it, so the same weights
  serve single steps and unrolls.

  Args:
    fn: maps `[N, *event_shape]` to `[N, *out_shape]`.
    x: tensor of shape `[*leading, *event_shape]`, at least one leading dim.
    event_rank: number of trailing dimensions that `fn` consumes.

  Returns:
    A tensor of shape `[*leading, *out_shape]`.
  """
  rank = x.shape.rank
  if rank is None or rank < event_rank + 1:
    raise ValueError(
        f'Expected an input with {event_rank} event dimension(s) and at least '
        f'one leading batch dimension, got shape {x.shape}.')
  num_leading = rank - event_rank
  if num_leading == 1:
    return fn(x)
  shape = tf.shape(x)
  flat = tf.reshape(x, tf.concat([[-1], shape[num_leading:]], axis=0))
  y = fn(flat)
  out = tf.reshape(y, tf.concat([shape[:num_leading], tf.shape(y)[1:]], 0))
  out.set_shape(x.shape[:num_leading].concatenate(y.shape[1:]))
  return out
