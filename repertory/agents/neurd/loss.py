"""The game-theoretic policy losses with an action-value critic, one
function per variant: NeuRD, MMD and A2C.

Time-major `[T, B]` (`[T, B, A]` for logits, action values, the legal-action
mask and the magnet's logits); mask m_t is 1 on real transitions, G_t the
returns (computed by the learner: `losses.discounted_returns`, bootstrapped
from V(o_T) at the end of an unroll). With π = softmax of the logits over
the legal actions:

    critic:  ½ m_t (G_t - Q(o_t, a_t))²
    V(o_t) = Σ_a π(a|o_t) Q(o_t, a),   A(o_t, a) = Q(o_t, a) - V(o_t)
    neurd_loss: -m_t Σ_{a legal} A(o_t, a) y_a(o_t)   (Hennes et al. 2020,
             "Neural Replicator Dynamics": the logits y follow the
             advantages of ALL legal actions, so an action the policy
             stopped playing still gets its signal; the pushes act on
             y_a - ȳ, ȳ the legal logits' mean, as softmax ignores a common
             offset, and one beyond ±clip from ȳ gets no further push
             outward)
    mmd_loss: NeuRD on the regularised action values
             Q̃(o, a) = Q(o, a) - α log(π(a|o) / ρ(a|o)), Ã = Q̃ - Σ_a π Q̃
             (Sokota et al. 2022, "A Unified Approach to Reinforcement
             Learning, Quantal Response Equilibria, and Two-Player Zero-Sum
             Games": magnetic mirror descent's closed form
             y ← (y + η Q + αη log ρ) / (1 + αη) is to first order in η the
             step y ← y + η Ã; its fixed point is π ∝ ρ exp(Q / α), a logit
             QRE for the uniform magnet ρ, and the live policy converges to
             it rather than cycling)
    a2c_loss: -m_t log π(a_t|o_t) (G_t - V(o_t))
    each plus baseline_cost · critic - entropy_cost · m_t H(π(·|o_t)),
    means over the real transitions.
"""

from typing import Optional

import tensorflow as tf

from repertory.components import losses
from repertory.components.losses import base

_ILLEGAL_LOGIT = -1e9


def masked_logits(logits: tf.Tensor, legal: tf.Tensor) -> tf.Tensor:
  """Illegal actions (legal == 0) at -1e9."""
  return tf.where(legal > 0, logits, tf.fill(tf.shape(logits), _ILLEGAL_LOGIT))


def _checked(fn, logits_t, q_t, legal_t, a_t, returns_t, mask_t):
  logits_t, q_t, legal_t, returns_t, mask_t = (
      base.to_float(x, n) for x, n in ((logits_t, 'logits_t'), (q_t, 'q_t'),
                                       (legal_t, 'legal_t'),
                                       (returns_t, 'returns_t'),
                                       (mask_t, 'mask_t')))
  base.check_rank(logits_t, 'logits_t', [3], fn)
  base.check_same_shape(fn, logits_t=logits_t, q_t=q_t, legal_t=legal_t)
  base.check_same_shape(fn, returns_t=returns_t, mask_t=mask_t)
  base.check_rank(tf.convert_to_tensor(a_t), 'a_t', [2], fn)
  base.check_shape(fn, 'returns_t', returns_t, logits_t.shape[:2],
                   "logits_t's [T, B]")
  return logits_t, q_t, legal_t, tf.cast(a_t, tf.int32), returns_t, mask_t


def _loss(policy_t, logits_t, q_t, legal_t, a_t, returns_t, mask_t,
          baseline_cost, entropy_cost) -> base.LossOutput:
  """Adds the critic and the entropy to a policy term `[T, B]`; means over
  the real transitions."""
  masked = masked_logits(logits_t, legal_t)
  critic = 0.5 * tf.square(returns_t - tf.gather(q_t, a_t, batch_dims=2))
  entropy = losses.categorical_entropy(masked)              # [T, B]
  valid = tf.maximum(tf.reduce_sum(mask_t), 1.0)
  mean = lambda x: tf.reduce_sum(mask_t * x) / valid  # pylint: disable=g-long-lambda
  total = mean(policy_t + baseline_cost * critic - entropy_cost * entropy)
  return base.LossOutput(total, {
      'policy_loss': mean(policy_t), 'critic_loss': mean(critic),
      'entropy': mean(entropy), 'mean_return': mean(returns_t)})


def _policy_and_v(logits_t, q_t, legal_t):
  pi = tf.nn.softmax(masked_logits(logits_t, legal_t))       # [T, B, A]
  v = tf.reduce_sum(tf.stop_gradient(pi) * q_t, axis=-1)    # [T, B]
  return pi, v


def _replicator(logits_t, advantage, legal_t, clip):
  """-Σ_a A(a) (y_a - ȳ) over legal actions, ȳ their mean logit; no push
  of y_a - ȳ beyond ±clip."""
  advantage = tf.stop_gradient(advantage) * legal_t
  count = tf.maximum(tf.reduce_sum(legal_t, axis=-1, keepdims=True), 1.0)
  centred = logits_t - tf.reduce_sum(logits_t * legal_t, axis=-1,
                                     keepdims=True) / count
  outward_ok = tf.where(advantage > 0, centred < clip, centred > -clip)
  return -tf.reduce_sum(advantage * tf.cast(outward_ok, tf.float32) *
                        centred, axis=-1)


def neurd_loss(logits_t: tf.Tensor, q_t: tf.Tensor, legal_t: tf.Tensor,
               a_t: tf.Tensor, returns_t: tf.Tensor, mask_t: tf.Tensor,
               clip: float = 10.0, baseline_cost: float = 0.5,
               entropy_cost: float = 0.0) -> base.LossOutput:
  """NeuRD with a Q critic (module docstring); `[T, B(, A)]`."""
  logits_t, q_t, legal_t, a_t, returns_t, mask_t = _checked(
      'neurd_loss', logits_t, q_t, legal_t, a_t, returns_t, mask_t)
  _, v = _policy_and_v(logits_t, q_t, legal_t)
  policy = _replicator(logits_t, q_t - v[..., None], legal_t, clip)
  return _loss(policy, logits_t, q_t, legal_t, a_t, returns_t, mask_t,
               baseline_cost, entropy_cost)


def mmd_loss(logits_t: tf.Tensor, q_t: tf.Tensor, legal_t: tf.Tensor,
             a_t: tf.Tensor, returns_t: tf.Tensor, mask_t: tf.Tensor,
             magnet_strength: float = 0.1,
             magnet_logits_t: Optional[tf.Tensor] = None, clip: float = 10.0,
             baseline_cost: float = 0.5, entropy_cost: float = 0.0
             ) -> base.LossOutput:
  """Magnetic mirror descent in NeuRD form (module docstring); the magnet ρ
  is softmax(`magnet_logits_t`) over the legal actions, None: uniform."""
  logits_t, q_t, legal_t, a_t, returns_t, mask_t = _checked(
      'mmd_loss', logits_t, q_t, legal_t, a_t, returns_t, mask_t)
  pi, _ = _policy_and_v(logits_t, q_t, legal_t)
  log_pi = tf.nn.log_softmax(masked_logits(logits_t, legal_t))
  log_rho = tf.nn.log_softmax(masked_logits(
      tf.zeros_like(logits_t) if magnet_logits_t is None
      else base.to_float(magnet_logits_t, 'magnet_logits_t'), legal_t))
  q_reg = (q_t - magnet_strength * (log_pi - log_rho)) * legal_t
  advantage = q_reg - tf.reduce_sum(tf.stop_gradient(pi) * q_reg, axis=-1,
                                    keepdims=True)
  policy = _replicator(logits_t, advantage, legal_t, clip)
  return _loss(policy, logits_t, q_t, legal_t, a_t, returns_t, mask_t,
               baseline_cost, entropy_cost)


def a2c_loss(logits_t: tf.Tensor, q_t: tf.Tensor, legal_t: tf.Tensor,
             a_t: tf.Tensor, returns_t: tf.Tensor, mask_t: tf.Tensor,
             baseline_cost: float = 0.5, entropy_cost: float = 0.0
             ) -> base.LossOutput:
  """The sampled action's log-probability times G_t - V(o_t), V from the
  Q critic (module docstring)."""
  logits_t, q_t, legal_t, a_t, returns_t, mask_t = _checked(
      'a2c_loss', logits_t, q_t, legal_t, a_t, returns_t, mask_t)
  _, v = _policy_and_v(logits_t, q_t, legal_t)
  policy = -losses.categorical_log_prob(
      masked_logits(logits_t, legal_t), a_t) * tf.stop_gradient(returns_t - v)
  return _loss(policy, logits_t, q_t, legal_t, a_t, returns_t, mask_t,
               baseline_cost, entropy_cost)
