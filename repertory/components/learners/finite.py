"""Updates that are applied only when they are finite.

    @tf.function
    def sgd_step(batch):
      with tf.GradientTape() as tape:
        loss = ...
      gradients = tape.gradient(loss, variables)
      applied = apply_if_finite(optimizer, gradients, variables, loss)
      return {'loss': loss, 'learner/finite': applied}

A NaN or infinite loss or gradient leaves the weights AND the optimizer's
state (Adam's moments and step) untouched; the caller logs and counts it
(`FaultTolerance.record_update`).
"""

from typing import Any, Optional, Sequence

import tensorflow as tf


def all_finite(*nests: Any) -> tf.Tensor:
  """A scalar bool: True iff every float tensor in `nests` is finite."""
  checks = [tf.reduce_all(tf.math.is_finite(t))
            for t in tf.nest.flatten(nests)
            if t is not None and tf.as_dtype(t.dtype).is_floating]
  return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)


def apply_if_finite(optimizer: Any, gradients: Sequence[Optional[tf.Tensor]],
                    variables: Sequence[tf.Variable],
                    loss: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Applies `gradients` to `variables` only if they (and `loss`) are finite.

  Works inside `tf.function` (one `tf.cond`) and eagerly.

  Args:
    optimizer: a Sonnet 2 optimizer (`apply(updates, parameters)`) or a Keras
      optimizer (`apply_gradients(pairs)`).
    gradients: one gradient per variable (None for an unconnected one).
    variables: the variables to update.
    loss: optionally also checked.

  Returns:
    A scalar bool tensor: whether the update was applied.
  """
  gradients = list(gradients)
  variables = list(variables)
  if len(gradients) != len(variables):
    raise ValueError(f'apply_if_finite: {len(gradients)} gradients for '
                     f'{len(variables)} variables.')
  finite = all_finite(gradients, loss)

  def apply():
    if hasattr(optimizer, 'apply_gradients'):
      optimizer.apply_gradients(
          [(g, v) for g, v in zip(gradients, variables) if g is not None])
    else:
      optimizer.apply(gradients, variables)
    return tf.constant(True)

  return tf.cond(finite, apply, lambda: tf.constant(False))


def create_optimizer_state(optimizer: Any,
                           variables: Sequence[tf.Variable]) -> None:
  """Creates an optimizer's slots (moments, step) without changing anything.

  Sonnet optimizers create their state on the first `apply`, and a checkpoint
  only restores into state that exists: call this before restoring a
  checkpoint that holds the optimizer. It applies zero gradients (a no-op for
  Adam, SGD and RMSProp) and resets the optimizer's integer step counters.
  """
  variables = list(variables)
  if hasattr(optimizer, 'apply_gradients'):
    optimizer.build(variables)
    return
  optimizer.apply([tf.zeros_like(v) for v in variables], variables)
  for variable in optimizer.variables:
    if variable.dtype.is_integer:
      variable.assign(tf.zeros_like(variable))
