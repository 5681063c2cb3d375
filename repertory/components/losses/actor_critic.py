"""The n-step advantage actor-critic loss of A3C.

Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning"
(arXiv:1602.01783), algorithm S3. Layout as in `vtrace.py`: `v_tm1`, `r_t`,
`discount_t` `[T, B]`, `bootstrap_value` `[B]`; a segment of T ≤ t_max steps
whose last state is bootstrapped with V(x_T) (use 0 with a 0 discount at a
terminal state).
"""

import tensorflow as tf

from repertory.components.losses import base


def discounted_returns(r_t: tf.Tensor, discount_t: tf.Tensor,
                       bootstrap_value: tf.Tensor) -> tf.Tensor:
  """R_s = r_s + γ_s R_{s+1}, R_T = V(x_T) (Mnih et al. 2016, alg. S3).

  Each step's return bootstraps at the end of the segment, so step s uses
  the (T - s)-step return; a discount of 0 ends it early.

  Args:
    r_t: `[T, B]` rewards.
    discount_t: `[T, B]` discounts (0 at episode ends).
    bootstrap_value: `[B]` V(x_T).

  Returns:
    `[T, B]` returns, gradients stopped.
  """
  fn = 'discounted_returns'
  r_t = base.to_float(r_t, 'r_t')
  discount_t = base.to_float(discount_t, 'discount_t')
  bootstrap_value = base.to_float(bootstrap_value, 'bootstrap_value')
  base.check_same_shape(fn, r_t=r_t, discount_t=discount_t)
  base.check_shape(fn, 'bootstrap_value', bootstrap_value, r_t.shape[1:],
                   'r_t without its leading time dimension')
  returns = tf.scan(lambda acc, e: e[0] + e[1] * acc, (r_t, discount_t),
                    initializer=bootstrap_value, reverse=True)
  return tf.stop_gradient(returns)


def actor_critic_loss_from_log_probs(
    log_prob: tf.Tensor,
    entropy: tf.Tensor,
    v_tm1: tf.Tensor,
    bootstrap_value: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    baseline_cost: float = 0.5,
    entropy_cost: float = 0.01,
) -> base.LossOutput:
  """A3C loss for any action distribution (Mnih et al. 2016, alg. S3).

    loss = mean[ -log π(a_s|x_s) (R_s - V(x_s))
                 + baseline_cost · ½ (R_s - V(x_s))²
                 - entropy_cost · H(π(·|x_s)) ]

  The advantage R_s - V(x_s) is a constant in the policy term; R_s carries
  no gradient (not through `bootstrap_value` either).

  Args:
    log_prob: `[T, B]` log π(a_s|x_s).
    entropy: `[T, B]` H(π(·|x_s)).
    v_tm1: `[T, B]` V(x_s).
    bootstrap_value, r_t, discount_t: as in `discounted_returns`.
    baseline_cost: weight of the value loss.
    entropy_cost: weight of the entropy bonus.

  Returns:
    `LossOutput(loss, extra)`; extra: 'policy_loss', 'baseline_loss',
    'entropy', 'mean_return', 'mean_advantage'.
  """
  fn = 'actor_critic_loss'
  log_prob = base.to_float(log_prob, 'log_prob')
  entropy = base.to_float(entropy, 'entropy')
  v_tm1 = base.to_float(v_tm1, 'v_tm1')
  base.check_same_shape(fn, log_prob=log_prob, entropy=entropy, v_tm1=v_tm1)
  returns = discounted_returns(r_t, discount_t, bootstrap_value)
  base.check_same_shape(fn, v_tm1=v_tm1, r_t=returns)
  with tf.name_scope(fn):
    advantages = returns - v_tm1
    policy_loss = -tf.reduce_mean(tf.stop_gradient(advantages) * log_prob)
    baseline_loss = 0.5 * tf.reduce_mean(tf.square(advantages))
    mean_entropy = tf.reduce_mean(entropy)
    loss = (policy_loss + baseline_cost * baseline_loss
            - entropy_cost * mean_entropy)
    extra = {
        'policy_loss': policy_loss,
        'baseline_loss': baseline_loss,
        'entropy': mean_entropy,
        'mean_return': tf.reduce_mean(returns),
        'mean_advantage': tf.reduce_mean(advantages),
    }
    return base.LossOutput(loss=loss, extra=extra)


def actor_critic_loss(
    logits: tf.Tensor,
    actions: tf.Tensor,
    *args,
    **kwargs,
) -> base.LossOutput:
  """A3C loss for discrete actions, π = softmax(logits) (Mnih et al. 2016).

  Args:
    logits: `[T, B, A]` policy logits at x_s.
    actions: `[T, B]` integer actions.
    *args, **kwargs: `actor_critic_loss_from_log_probs`'s arguments after
      `entropy`: v_tm1, bootstrap_value, r_t, discount_t, baseline_cost,
      entropy_cost.

  Returns:
    `LossOutput(loss, extra)` as in `actor_critic_loss_from_log_probs`.
  """
  logits = base.to_float(logits, 'logits')
  base.check_rank(logits, 'logits', [3], 'actor_critic_loss')
  return actor_critic_loss_from_log_probs(
      base.categorical_log_prob(logits, actions),
      base.categorical_entropy(logits), *args, **kwargs)
