"""Generalized advantage estimation and the PPO clipped surrogate loss.

Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
Advantage Estimation" (arXiv:1506.02438), and Schulman et al. 2017, "Proximal
Policy Optimization Algorithms" (arXiv:1707.06347).

GAE uses the time-major layout of `vtrace.py` (`v_tm1`, `r_t`, `discount_t`
`[T, B]`, `bootstrap_value` `[B]`). The PPO loss is elementwise: its inputs
may have any shape (`[T, B]` or a flattened minibatch `[N]`), all equal.

The clip ranges may be Python numbers or scalar tensors (a `tf.Variable`
that a learner anneals to 0, as the RL Baselines3 Zoo's PPO settings do,
without retracing its `tf.function`).
"""

from typing import NamedTuple, Optional, Union

import tensorflow as tf

from repertory.components.losses import base

# A clip range: a number >= 0, or a scalar tensor (e.g. an annealed Variable).
ClipRange = Union[float, tf.Tensor, tf.Variable]


def _check_clip(fn: str, name: str, value) -> None:
  """Python numbers must be >= 0; tensors are taken as they are."""
  if isinstance(value, (tf.Tensor, tf.Variable)):
    if value.shape.rank not in (None, 0):
      raise ValueError(f'{fn}: {name} must be a scalar, got shape '
                       f'{value.shape}.')
    return
  if not value >= 0:
    raise ValueError(f'{fn}: {name} must be >= 0, got {value!r}.')


class AdvantageEstimate(NamedTuple):
  """GAE results; both `[T, B]`, gradients stopped.

  Attributes:
    advantages: Â_s = Σ_l (Π γλ) δ_{s+l}, the GAE(γ, λ) advantage.
    returns: Â_s + V(x_s), the λ-return, the value target.
  """
  advantages: tf.Tensor
  returns: tf.Tensor


def generalized_advantage_estimation(
    v_tm1: tf.Tensor,
    bootstrap_value: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    lambda_: float = 0.95,
) -> AdvantageEstimate:
  """GAE(γ, λ) (Schulman et al. 2016, eq. 16), per-step discounts.

    δ_s = r_s + γ_s V(x_{s+1}) - V(x_s),   Â_s = δ_s + γ_s λ Â_{s+1},  Â_T = 0

  A discount of 0 (episode end inside the unroll) cuts the sum.

  Args:
    v_tm1: `[T, B]` values V(x_s) of the behaviour-time value function.
    bootstrap_value: `[B]` V(x_T).
    r_t: `[T, B]` rewards r_s.
    discount_t: `[T, B]` discounts γ_s (0 at episode ends).
    lambda_: λ in [0, 1].

  Returns:
    `AdvantageEstimate(advantages, returns)`, both `[T, B]`.
  """
  fn = 'generalized_advantage_estimation'
  v_tm1 = base.to_float(v_tm1, 'v_tm1')
  bootstrap_value = base.to_float(bootstrap_value, 'bootstrap_value')
  r_t = base.to_float(r_t, 'r_t')
  discount_t = base.to_float(discount_t, 'discount_t')
  base.check_rank(v_tm1, 'v_tm1', [1, 2, 3], fn)
  base.check_same_shape(fn, v_tm1=v_tm1, r_t=r_t, discount_t=discount_t)
  base.check_shape(fn, 'bootstrap_value', bootstrap_value, v_tm1.shape[1:],
                   'v_tm1 without its leading time dimension')
  base.check_unit_interval(fn, 'lambda_', lambda_)
  with tf.name_scope('gae'):
    v_t = base.next_values(v_tm1, bootstrap_value)
    deltas = r_t + discount_t * v_t - v_tm1
    advantages = tf.scan(
        lambda acc, e: e[0] + e[1] * lambda_ * acc, (deltas, discount_t),
        initializer=tf.zeros_like(bootstrap_value), reverse=True)
    advantages = tf.stop_gradient(advantages)
    returns = tf.stop_gradient(advantages + v_tm1)
    return AdvantageEstimate(advantages=advantages, returns=returns)


def clipped_surrogate_objective(
    log_prob: tf.Tensor,
    old_log_prob: tf.Tensor,
    advantages: tf.Tensor,
    epsilon: ClipRange = 0.2,
) -> tf.Tensor:
  """Elementwise PPO-clip objective (Schulman et al. 2017, eq. 7), to maximise.

    r = π(a|x) / π_old(a|x),   L = min(r Â, clip(r, 1-ε, 1+ε) Â)

  Args:
    log_prob: log π(a|x) under the current policy (gradients flow here).
    old_log_prob: log π_old(a|x) at collection time (no gradient).
    advantages: Â (no gradient).
    epsilon: clip range ε >= 0 (a number or a scalar tensor; 0, the end of
      an annealing schedule, leaves only the decreasing side of L).

  Returns:
    L per element, same shape as the inputs.
  """
  fn = 'clipped_surrogate_objective'
  log_prob = base.to_float(log_prob, 'log_prob')
  old_log_prob = base.to_float(old_log_prob, 'old_log_prob')
  advantages = base.to_float(advantages, 'advantages')
  base.check_same_shape(fn, log_prob=log_prob, old_log_prob=old_log_prob,
                        advantages=advantages)
  _check_clip(fn, 'epsilon', epsilon)
  ratio = tf.exp(log_prob - tf.stop_gradient(old_log_prob))
  advantages = tf.stop_gradient(advantages)
  clipped = tf.clip_by_value(ratio, 1.0 - epsilon, 1.0 + epsilon)
  return tf.minimum(ratio * advantages, clipped * advantages)


def ppo_loss(
    log_prob: tf.Tensor,
    old_log_prob: tf.Tensor,
    advantages: tf.Tensor,
    v_tm1: tf.Tensor,
    old_v_tm1: tf.Tensor,
    returns: tf.Tensor,
    entropy: tf.Tensor,
    clip_epsilon: ClipRange = 0.2,
    value_clip_epsilon: Optional[ClipRange] = 0.2,
    value_cost: float = 0.5,
    entropy_cost: float = 0.01,
    normalize_advantages: bool = True,
) -> base.LossOutput:
  """The PPO loss (Schulman et al. 2017, eq. 9), with value clipping.

    loss = -mean L^CLIP + value_cost · L^V - entropy_cost · mean H

  L^V = ½ mean max((V - R)², (V_old + clip(V - V_old, ±ε_v) - R)²) when
  `value_clip_epsilon` is set (as in the OpenAI baselines implementation),
  ½ mean (V - R)² otherwise. Note the ½: Stable-Baselines3's `vf_coef`
  multiplies the plain mean squared error, so its `vf_coef=0.5` (and no
  `clip_range_vf`, its default) is `value_cost=1.0, value_clip_epsilon=None`
  here.

  Advantage normalisation standardises Â over the elements given (call it
  per minibatch for SB3's and CleanRL's scope) with the sample standard
  deviation (Bessel's correction, as their `torch.std()`), and leaves a
  single element as it is (its deviation is undefined; SB3 skips it too).

  Args:
    log_prob: log π(a|x) under the current policy.
    old_log_prob: log π_old(a|x) recorded at collection time.
    advantages: Â, e.g. from `generalized_advantage_estimation`.
    v_tm1: V(x) under the current value function.
    old_v_tm1: V_old(x) recorded at collection time.
    returns: value targets R (e.g. GAE's λ-returns).
    entropy: entropy of the current policy at x.
    clip_epsilon: ε >= 0 of the policy clip (a number or a scalar tensor).
    value_clip_epsilon: ε_v >= 0 of the value clip (a number or a scalar
      tensor); None disables it.
    value_cost: weight of L^V.
    entropy_cost: weight of the entropy bonus.
    normalize_advantages: standardise Â over all elements (mean 0, sample
      std 1).

  Returns:
    `LossOutput(loss, extra)`; extra: 'policy_loss', 'value_loss', 'entropy',
    'approx_kl' (mean of (r - 1) - log r), 'clip_fraction'.
  """
  fn = 'ppo_loss'
  tensors = {
      'log_prob': log_prob, 'old_log_prob': old_log_prob,
      'advantages': advantages, 'v_tm1': v_tm1, 'old_v_tm1': old_v_tm1,
      'returns': returns, 'entropy': entropy}
  tensors = {k: base.to_float(v, k) for k, v in tensors.items()}
  base.check_same_shape(fn, **tensors)
  _check_clip(fn, 'clip_epsilon', clip_epsilon)
  if value_clip_epsilon is not None:
    _check_clip(fn, 'value_clip_epsilon', value_clip_epsilon)
  log_prob, old_log_prob = tensors['log_prob'], tensors['old_log_prob']
  v_tm1, old_v_tm1 = tensors['v_tm1'], tensors['old_v_tm1']
  returns = tf.stop_gradient(tensors['returns'])
  advantages = tf.stop_gradient(tensors['advantages'])
  with tf.name_scope(fn):
    if normalize_advantages:
      advantages = _standardized(advantages)
    objective = clipped_surrogate_objective(log_prob, old_log_prob,
                                            advantages, clip_epsilon)
    policy_loss = -tf.reduce_mean(objective)
    value_loss = _value_loss(v_tm1, old_v_tm1, returns, value_clip_epsilon)
    mean_entropy = tf.reduce_mean(tensors['entropy'])
    loss = policy_loss + value_cost * value_loss - entropy_cost * mean_entropy
    log_ratio = tf.stop_gradient(log_prob - old_log_prob)
    ratio = tf.exp(log_ratio)
    extra = {
        'policy_loss': policy_loss,
        'value_loss': value_loss,
        'entropy': mean_entropy,
        'approx_kl': tf.reduce_mean((ratio - 1.0) - log_ratio),
        'clip_fraction': tf.reduce_mean(tf.cast(
            tf.abs(ratio - 1.0) > clip_epsilon, tf.float32)),
    }
    return base.LossOutput(loss=loss, extra=extra)


def _standardized(advantages: tf.Tensor) -> tf.Tensor:
  """Â over all elements to mean 0 and sample standard deviation 1 (Bessel's
  correction); a single element stays as it is."""
  mean, variance = tf.nn.moments(advantages, axes=list(
      range(advantages.shape.rank)))
  n = tf.cast(tf.size(advantages), tf.float32)
  std = tf.sqrt(variance * n / tf.maximum(n - 1.0, 1.0))
  return tf.where(n > 1.0, (advantages - mean) / (std + 1e-8), advantages)


def _value_loss(v_tm1: tf.Tensor, old_v_tm1: tf.Tensor, returns: tf.Tensor,
                value_clip_epsilon: Optional[ClipRange]) -> tf.Tensor:
  """½ mean (V - R)², or with ε_v the larger of it and the clipped value's
  error, V_old + clip(V - V_old, ±ε_v)."""
  value_error = tf.square(v_tm1 - returns)
  if value_clip_epsilon is not None:
    old_v_tm1 = tf.stop_gradient(old_v_tm1)
    v_clipped = old_v_tm1 + tf.clip_by_value(
        v_tm1 - old_v_tm1, -value_clip_epsilon, value_clip_epsilon)
    value_error = tf.maximum(value_error, tf.square(v_clipped - returns))
  return 0.5 * tf.reduce_mean(value_error)
