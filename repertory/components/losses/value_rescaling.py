"""Invertible value transforms as (apply, apply_inverse) pairs.

Pohlen et al. 2018, "Observe and Look Further: Achieving Consistent
Performance on Atari" (arXiv:1805.11593), proposition A.2, as used by R2D2
(Kapturowski et al. 2019):

  h(x)    = sign(x) (√(|x| + 1) - 1) + εx
  h⁻¹(x)  = sign(x) (((√(1 + 4ε(|x| + 1 + ε)) - 1) / 2ε)² - 1)

Both are evaluated in algebraically equal forms that avoid cancellation, so
the round trip holds to float32 precision for small and large |x|.
"""

import functools
from typing import Callable, NamedTuple

import numpy as np
import tensorflow as tf

R2D2_EPSILON = 1e-3


class ValueTransform(NamedTuple):
  """A value transform and its inverse; `apply_inverse(apply(x)) == x`."""
  apply: Callable[[tf.Tensor], tf.Tensor]
  apply_inverse: Callable[[tf.Tensor], tf.Tensor]


def _h(x, eps: float, ops):
  """h with the array functions of `ops` (`tf.math` or `numpy`)."""
  abs_x = ops.abs(x)
  # √(y+1) - 1 = y / (√(y+1) + 1), without cancellation for small y.
  return ops.sign(x) * abs_x / (ops.sqrt(abs_x + 1.0) + 1.0) + eps * x


def _h_inverse(x, eps: float, ops):
  """h⁻¹ with the array functions of `ops` (`tf.math` or `numpy`)."""
  y = ops.abs(x)
  root = ops.sqrt(1.0 + 4.0 * eps * (y + 1.0 + eps))
  # u = (root - 1) / 2ε and h⁻¹ = sign(x)(u - 1)(u + 1), with
  # u - 1 = 4y(y + 1 + ε) / ((2y + 1 + 2ε + root)(root + 1)).
  u = 2.0 * (y + 1.0 + eps) / (root + 1.0)
  u_minus_1 = 4.0 * y * (y + 1.0 + eps) / (
      (2.0 * y + 1.0 + 2.0 * eps + root) * (root + 1.0))
  return ops.sign(x) * u_minus_1 * (u + 1.0)


def signed_hyperbolic(x: tf.Tensor, eps: float = R2D2_EPSILON) -> tf.Tensor:
  """h(x) = sign(x)(√(|x|+1) - 1) + εx (Pohlen et al. 2018; R2D2)."""
  return _h(tf.cast(tf.convert_to_tensor(x), tf.float32), eps, tf.math)


def signed_parabolic(x: tf.Tensor, eps: float = R2D2_EPSILON) -> tf.Tensor:
  """h⁻¹(x), the inverse of `signed_hyperbolic` (Pohlen et al. 2018, A.2)."""
  return _h_inverse(tf.cast(tf.convert_to_tensor(x), tf.float32), eps,
                    tf.math)


def numpy_signed_hyperbolic_transform(
    eps: float = R2D2_EPSILON) -> ValueTransform:
  """The same (h, h⁻¹) pair on numpy arrays in their own precision, for
  per-item work outside TensorFlow (an actor's initial priorities)."""
  if not eps > 0:
    raise ValueError(f'numpy_signed_hyperbolic_transform: eps must be > 0, '
                     f'got {eps!r}.')
  return ValueTransform(
      lambda x: _h(np.asarray(x), eps, np),
      lambda x: _h_inverse(np.asarray(x), eps, np))


def signed_hyperbolic_transform(eps: float = R2D2_EPSILON) -> ValueTransform:
  """The (h, h⁻¹) pair with a given ε (R2D2: ε = 1e-3)."""
  if not eps > 0:
    raise ValueError(f'signed_hyperbolic_transform: eps must be > 0, got '
                     f'{eps!r}.')
  return ValueTransform(functools.partial(signed_hyperbolic, eps=eps),
                        functools.partial(signed_parabolic, eps=eps))


def identity(x: tf.Tensor) -> tf.Tensor:
  """The identity transform (as float32), for untransformed targets."""
  return tf.cast(tf.convert_to_tensor(x), tf.float32)


IDENTITY_TRANSFORM = ValueTransform(apply=identity, apply_inverse=identity)
SIGNED_HYPERBOLIC_TRANSFORM = signed_hyperbolic_transform(R2D2_EPSILON)
