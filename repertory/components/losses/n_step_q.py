"""Transformed n-step double Q-learning (R2D2, Ape-X) and sequence priorities.

Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed
Reinforcement Learning" (R2D2, ICLR), section 2; van Hasselt et al. 2016,
"Deep Reinforcement Learning with Double Q-learning"; Horgan et al. 2018,
"Distributed Prioritized Experience Replay" (Ape-X).

Sequence layout (R2D2), time-major, s = 0..T-1 transitions:

  q_tm1[s]         Q_online(x_s, ·)                              [T, B, A]
  a_tm1[s]         a_s, the action taken at x_s                  [T, B] int
  r_t[s]           r_s, the reward after a_s                     [T, B]
  discount_t[s]    γ for x_{s+1}; 0 if x_{s+1} is terminal       [T, B]
  target_q_t[s]    Q_target(x_{s+1}, ·)                          [T, B, A]
  selector_q_t[s]  Q_online(x_{s+1}, ·), picks a* (double Q)     [T, B, A]

For a replayed sequence of observations x_0..x_T with online and target
values q and q', pass q_tm1 = q[:-1], target_q_t = q'[1:],
selector_q_t = q[1:].
"""

from typing import NamedTuple

import tensorflow as tf

from repertory.components.losses import base
from repertory.components.losses import value_rescaling


class TDOutput(NamedTuple):
  """Elementwise TD results.

  Attributes:
    loss: ½ td_error², elementwise (weight by importance weights, then
      average, in the learner).
    td_error: target - Q(x_s, a_s), in the transformed space.
    target: the (transformed) target; carries no gradient.
  """
  loss: tf.Tensor
  td_error: tf.Tensor
  target: tf.Tensor


def n_step_bootstrapped_returns(r_t: tf.Tensor, discount_t: tf.Tensor,
                                v_t: tf.Tensor, n: int) -> tf.Tensor:
  """n-step returns bootstrapped on v_t, truncated at the end of the sequence.

    G_s = Σ_{k<m} (Π_{j<k} γ_{s+j}) r_{s+k} + (Π_{j<m} γ_{s+j}) v_t[s+m-1],
    m = min(n, T - s)

  (Sutton & Barto 2018, eq. 7.1, with per-step discounts.)

  Args:
    r_t: `[T, B]` rewards r_s.
    discount_t: `[T, B]` discounts γ_s (0 cuts the return at an episode end).
    v_t: `[T, B]` value of x_{s+1}.
    n: number of steps, >= 1.

  Returns:
    `[T, B]` returns G_s.
  """
  fn = 'n_step_bootstrapped_returns'
  r_t = base.to_float(r_t, 'r_t')
  discount_t = base.to_float(discount_t, 'discount_t')
  v_t = base.to_float(v_t, 'v_t')
  base.check_same_shape(fn, r_t=r_t, discount_t=discount_t, v_t=v_t)
  if int(n) != n or n < 1:
    raise ValueError(f'{fn}: n must be an int >= 1, got {n!r}.')
  num_steps = r_t.shape[0]
  if num_steps is None:
    raise ValueError(f'{fn}: the time dimension must be known statically.')
  n = min(int(n), num_steps)
  # Bootstrap G_s = v_t[min(s + n - 1, T - 1)], then fold in n rewards
  # backwards; past the end, r = 0 and γ = 1 carry the return through.
  last = v_t[-1:]
  returns = tf.concat([v_t[n - 1:]] + [last] * (n - 1), axis=0)
  for i in reversed(range(n)):
    r = tf.concat([r_t[i:], tf.zeros_like(r_t[:i])], axis=0)
    d = tf.concat([discount_t[i:], tf.ones_like(discount_t[:i])], axis=0)
    returns = r + d * returns
  return returns


def _double_q_bootstrap(target_q_t, selector_q_t):
  a_star = tf.argmax(selector_q_t, axis=-1, output_type=tf.int32)
  return tf.gather(target_q_t, a_star, axis=-1, batch_dims=a_star.shape.rank)


def _q_inputs(fn, rank, q_tm1, a_tm1, r_t, discount_t, target_q_t,
              selector_q_t):
  """The inputs as float32 (actions int32), checked: `q_tm1` of `rank`."""
  q_tm1 = base.to_float(q_tm1, 'q_tm1')
  target_q_t = base.to_float(target_q_t, 'target_q_t')
  selector_q_t = base.to_float(selector_q_t, 'selector_q_t')
  r_t = base.to_float(r_t, 'r_t')
  discount_t = base.to_float(discount_t, 'discount_t')
  a_tm1 = tf.cast(tf.convert_to_tensor(a_tm1), tf.int32)
  base.check_rank(q_tm1, 'q_tm1', [rank], fn)
  _check_q_inputs(fn, q_tm1, a_tm1, target_q_t, selector_q_t, r_t=r_t,
                  discount_t=discount_t)
  return q_tm1, a_tm1, r_t, discount_t, target_q_t, selector_q_t


def _check_q_inputs(fn, q_tm1, a_tm1, target_q_t, selector_q_t, **scalars):
  base.check_same_shape(fn, q_tm1=q_tm1, target_q_t=target_q_t,
                        selector_q_t=selector_q_t)
  base.check_same_shape(fn, a_tm1=a_tm1, **scalars)
  base.check_shape(fn, 'a_tm1', a_tm1, q_tm1.shape[:-1],
                   'q_tm1 without its action dimension')


def transformed_n_step_double_q_learning(
    q_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    target_q_t: tf.Tensor,
    selector_q_t: tf.Tensor,
    n: int = 5,
    transform: value_rescaling.ValueTransform = (
        value_rescaling.SIGNED_HYPERBOLIC_TRANSFORM),
) -> TDOutput:
  """R2D2's transformed n-step double-Q TD errors (Kapturowski et al. 2019).

    a*_s   = argmax_a Q_online(x_{s+1}, a)
    v_s    = h⁻¹(Q_target(x_{s+1}, a*_s))
    y_s    = h( Σ_{k<m} Γ_{s,k} r_{s+k} + Γ_{s,m} v_{s+m-1} ),  m = min(n, T-s)
    δ_s    = y_s - Q_online(x_s, a_s)

  Args:
    q_tm1, a_tm1, r_t, discount_t, target_q_t, selector_q_t: see the module
      docstring; `[T, B, A]` / `[T, B]`.
    n: bootstrap horizon (R2D2: 5).
    transform: (h, h⁻¹); `IDENTITY_TRANSFORM` for untransformed targets.

  Returns:
    `TDOutput(loss, td_error, target)`, each `[T, B]`.
  """
  fn = 'transformed_n_step_double_q_learning'
  q_tm1, a_tm1, r_t, discount_t, target_q_t, selector_q_t = _q_inputs(
      fn, 3, q_tm1, a_tm1, r_t, discount_t, target_q_t, selector_q_t)
  with tf.name_scope(fn):
    v_t = transform.apply_inverse(
        _double_q_bootstrap(target_q_t, selector_q_t))
    returns = n_step_bootstrapped_returns(r_t, discount_t, v_t, n)
    target = tf.stop_gradient(transform.apply(returns))
    q_a = tf.gather(q_tm1, a_tm1, axis=-1, batch_dims=2)
    td_error = target - q_a
    return TDOutput(loss=0.5 * tf.square(td_error), td_error=td_error,
                    target=target)


def double_q_learning(
    q_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    target_q_t: tf.Tensor,
    selector_q_t: tf.Tensor,
    transform: value_rescaling.ValueTransform = (
        value_rescaling.IDENTITY_TRANSFORM),
) -> TDOutput:
  """Double Q-learning on (n-step) transitions (van Hasselt et al. 2016;
  Ape-X, Horgan et al. 2018).

    y = h(r + γ h⁻¹(Q_target(x', argmax_a Q_online(x', a)))),
    δ = y - Q_online(x, a)

  For Ape-X's n-step transitions r is the discounted sum of the n rewards
  and γ is γⁿ (0 if the episode ended within them).

  Args:
    q_tm1: `[B, A]` Q_online(x, ·).
    a_tm1: `[B]` actions.
    r_t: `[B]` (n-step) rewards.
    discount_t: `[B]` (n-step) discounts.
    target_q_t: `[B, A]` Q_target(x', ·).
    selector_q_t: `[B, A]` Q_online(x', ·).
    transform: (h, h⁻¹); identity by default.

  Returns:
    `TDOutput(loss, td_error, target)`, each `[B]`; |td_error| is Ape-X's
    priority.
  """
  fn = 'double_q_learning'
  q_tm1, a_tm1, r_t, discount_t, target_q_t, selector_q_t = _q_inputs(
      fn, 2, q_tm1, a_tm1, r_t, discount_t, target_q_t, selector_q_t)
  with tf.name_scope(fn):
    v_t = transform.apply_inverse(
        _double_q_bootstrap(target_q_t, selector_q_t))
    target = tf.stop_gradient(transform.apply(r_t + discount_t * v_t))
    q_a = tf.gather(q_tm1, a_tm1, axis=-1, batch_dims=1)
    td_error = target - q_a
    return TDOutput(loss=0.5 * tf.square(td_error), td_error=td_error,
                    target=target)


def r2d2_priority(td_error: tf.Tensor, eta: float = 0.9) -> tf.Tensor:
  """Sequence priority η max_s |δ_s| + (1 - η) mean_s |δ_s| (R2D2, sec. 2).

  Args:
    td_error: `[T, B]` TD errors of each sequence.
    eta: η in [0, 1] (R2D2: 0.9).

  Returns:
    `[B]` priorities, no gradient.
  """
  fn = 'r2d2_priority'
  td_error = base.to_float(td_error, 'td_error')
  base.check_rank(td_error, 'td_error', [2], fn)
  base.check_unit_interval(fn, 'eta', eta)
  abs_td = tf.abs(tf.stop_gradient(td_error))
  return (eta * tf.reduce_max(abs_td, axis=0)
          + (1.0 - eta) * tf.reduce_mean(abs_td, axis=0))
