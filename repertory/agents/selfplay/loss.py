"""The self-play loss: NeuRD (or A2C, or MMD) with an action-value critic on
per-player trajectories.

Items (`SequenceAdder`, zero-padded, one per player per game), `[B, L]`:
observation o_t at the player's t-th turn (with its legal actions), its
action a_t, the reward r_t it received until its next turn (or the end),
discount d_t (0 into the end), step_type (LAST at the final observation and
the padding). Time-major, T = L - 1 transitions, valid where
step_type[t] != LAST (mask m_t):

    G_t = r_t + γ d_t G_{t+1},  G_T = 0       (whole games: no bootstrap)
    critic:  ½ m_t (G_t - Q(o_t, a_t))²
    V(o_t) = Σ_a π(a|o_t) Q(o_t, a),   A(o_t, a) = Q(o_t, a) - V(o_t)
    'neurd': -m_t Σ_{a legal} A(o_t, a) y_a(o_t)   (Hennes et al. 2020, Neural
             Replicator Dynamics: the logits y follow the advantages of ALL
             legal actions, so an action the policy stopped playing still
             gets its signal; a logit beyond ±neurd_clip gets no further push
             outward)
    'a2c':   -m_t log π(a_t|o_t) (G_t - V(o_t))
    'mmd':   -m_t Σ_{a legal} Ã(o_t, a) y_a(o_t), NeuRD on the regularised
             action values  Q̃(o, a) = Q(o, a) - α log(π(a|o) / ρ(a|o)),
             Ã = Q̃ - Σ_a π(a|o) Q̃(o, a)  (same clip as 'neurd').
             This is magnetic mirror descent (Sokota et al. 2022, "A Unified
             Approach to Reinforcement Learning, Quantal Response Equilibria,
             and Two-Player Zero-Sum Games") per information state with
             action values: MMD's closed form, y ← (y + η Q + αη log ρ) /
             (1 + αη), is to first order in η the step y ← y + η Ã. Its
             fixed point is π ∝ ρ exp(Q / α) (a logit QRE for a uniform
             magnet ρ), and the live policy converges to it rather than
             cycling; α = magnet_strength; ρ is uniform over the legal
             actions, or the magnet network (a copy of the live network
             taken every magnet_update_steps: a moving magnet).
    minus entropy_cost · m_t H(π(·|o_t)).
"""

from typing import Any, Callable, Dict, NamedTuple, Optional

import tensorflow as tf

from repertory.agents.selfplay import config as config_lib
from repertory.agents.selfplay import networks as networks_lib
from repertory.components import learners
from repertory.components import losses

_LAST = 2  # dm_env.StepType.LAST


class SelfPlayLoss(NamedTuple):
  """The loss and its parts, each a masked mean over valid steps."""
  total: tf.Tensor
  critic: tf.Tensor
  policy: tf.Tensor
  entropy: tf.Tensor
  mean_return: tf.Tensor


def selfplay_loss(logits_t: tf.Tensor, q_t: tf.Tensor, legal_t: tf.Tensor,
                  a_t: tf.Tensor, r_t: tf.Tensor, discount_t: tf.Tensor,
                  step_type_t: tf.Tensor, config: config_lib.Config,
                  magnet_logits_t: Optional[tf.Tensor] = None
                  ) -> SelfPlayLoss:
  """The loss of the module docstring. Time-major `[T, B]` (`[T, B, A]` for
  logits, Q, the legal-action mask and the magnet's logits); whole games, so
  G_T = 0. `magnet_logits_t` ('mmd' only): None is the uniform magnet."""
  c = config
  mask = tf.cast(step_type_t != _LAST, tf.float32)          # [T, B]
  legal = tf.cast(legal_t, tf.float32)
  returns = losses.discounted_returns(                      # G_t [T, B]
      tf.cast(r_t, tf.float32), c.discount * tf.cast(discount_t, tf.float32),
      tf.zeros_like(tf.cast(r_t[0], tf.float32)))
  masked = networks_lib.masked_logits(logits_t, legal)
  pi = tf.nn.softmax(masked)                                # [T, B, A]
  critic = 0.5 * tf.square(
      returns - tf.gather(q_t, tf.cast(a_t, tf.int32), batch_dims=2))
  v = tf.reduce_sum(tf.stop_gradient(pi) * q_t, axis=-1)    # [T, B]
  if c.policy_loss in ('neurd', 'mmd'):
    if c.policy_loss == 'mmd':
      log_pi = tf.nn.log_softmax(masked)
      log_rho = tf.nn.log_softmax(networks_lib.masked_logits(
          tf.zeros_like(logits_t) if magnet_logits_t is None
          else magnet_logits_t, legal))
      q_reg = (q_t - c.magnet_strength * (log_pi - log_rho)) * legal
      advantage = q_reg - tf.reduce_sum(pi * q_reg, axis=-1, keepdims=True)
      advantage = tf.stop_gradient(advantage) * legal
    else:
      advantage = tf.stop_gradient(q_t - v[..., None]) * legal  # [T, B, A]
    outward_ok = tf.where(advantage > 0, logits_t < c.neurd_clip,
                          logits_t > -c.neurd_clip)
    policy = -tf.reduce_sum(
        advantage * tf.cast(outward_ok, tf.float32) * logits_t, axis=-1)
  else:
    policy = -losses.categorical_log_prob(masked, a_t) * tf.stop_gradient(
        returns - v)
  entropy = losses.categorical_entropy(masked)              # [T, B]
  valid = tf.maximum(tf.reduce_sum(mask), 1.0)
  mean = lambda x: tf.reduce_sum(mask * x) / valid  # pylint: disable=g-long-lambda
  return SelfPlayLoss(
      total=mean(policy + c.baseline_cost * critic - c.entropy_cost * entropy),
      critic=mean(critic), policy=mean(policy), entropy=mean(entropy),
      mean_return=mean(returns))


def make_update(config: config_lib.Config, network: Any, optimizer: Any,
                magnet: Optional[Any] = None
                ) -> Callable[[Any], Dict[str, Any]]:
  """One step of `selfplay_loss` per batch of items (`[B, L, ...]`, as the
  dataset gives them): `update(data) -> metrics`. `magnet`: the network
  whose logits are MMD's moving magnet (None: uniform or no magnet)."""
  c = config

  def update(data):
    time_major = lambda x: tf.nest.map_structure(  # pylint: disable=g-long-lambda
        lambda t: tf.transpose(t, [1, 0] + list(range(2, t.shape.rank))), x)
    observation = time_major(data['observation'])          # [L, B, ...]
    with tf.GradientTape() as tape:
      out = network(observation['observation'])            # [L, B, A]
      magnet_logits = (None if magnet is None else
                       magnet(observation['observation']).logits[:-1])
      loss = selfplay_loss(
          out.logits[:-1], out.q[:-1], observation['legal_actions'][:-1],
          tf.transpose(data['action'])[:-1], tf.transpose(data['reward'])[:-1],
          tf.transpose(data['discount'])[:-1],
          tf.transpose(data['step_type'])[:-1], c, magnet_logits)
    variables = network.trainable_variables
    gradients = tape.gradient(loss.total, variables)
    gradients, norm = tf.clip_by_global_norm(gradients, c.max_gradient_norm)
    applied = learners.apply_if_finite(optimizer, gradients, variables,
                                       loss.total)
    return dict(loss._asdict(), gradient_norm=norm, applied=applied)

  return tf.function(update, autograph=False)
