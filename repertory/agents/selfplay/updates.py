"""IMPALA's V-trace and PPO's clipped epochs on per-player self-play
trajectories: `--config.policy_loss=vtrace|ppo` (what `--agent=impala
--selfplay=<rule>` and `--agent=ppo --selfplay=<rule>` run; docs/selfplay.md).

Items as in loss.py (`[B, L]`, zero padded after LAST; time-major
T = L - 1 transitions, valid where step_type[t] != LAST, mask m_t). The
network is the same policy + Q network for every policy loss (league
snapshots, `repertory.play` and resumption do not depend on it); the state
value these losses need is the Q head's policy average

    V(o_t) = Σ_a sg(π(a|o_t)) Q(o_t, a)

With `use_lstm` ('vtrace' only) the network is IMPALA's LSTM network with
a state-value head, V(o_t) its value, unrolled over the item's L steps
from the core state stored with its first step (items never cross games,
so no state is reset inside one). With `unroll_length` an item may end
before its game does: V-trace bootstraps from V(o_T) where step T is not
LAST (0 where it is, which whole-game items always are).

'vtrace' (Espeholt et al. 2018): `losses.impala_loss` with the behaviour
log-probabilities log μ(a_t|o_t) the actors recorded (their ε-exploration
included), so the learner's lag behind the actors and the exploring moves
are corrected by the clipped importance weights (ρ̄ = c̄ =
`clip_rho_threshold`). Invalid steps enter with V = r = γ = log μ = 0 and
the constant logits of a sure action 0, so their terms and gradients are
exactly 0; the mean is rescaled
to the valid steps. One gradient step per batch.

'ppo' (Schulman et al. 2017): GAE(γ, `gae_lambda`) advantages
(`losses.generalized_advantage_estimation`) from the values of the network
the batch arrived at, then `ppo_epochs` passes of `ppo_minibatches`
shuffled minibatches of the valid steps through `losses.ppo_loss` (clip
`ppo_clip`, value clipping with the same ε, minibatch-normalised
advantages), the ratio taken against the recorded behaviour
log-probabilities. The learner feeds it synchronous rounds (every actor's
trajectories of one policy version, `agents.actor_critic.rounds`), so the first
minibatch's ratio differs from 1 only by the actors' ε-exploration
(`first_minibatch_kl`, 0 with `exploration=0`).
"""

from typing import Any, Callable, Dict

import sonnet as snt
import tensorflow as tf

from repertory.agents.selfplay import config as config_lib
from repertory.agents.selfplay import networks as networks_lib
from repertory.components import learners
from repertory.components import losses

POLICY_LOSSES = ('vtrace', 'ppo')
_LAST = 2  # dm_env.StepType.LAST


def _time_major(x: tf.Tensor) -> tf.Tensor:
  x = tf.convert_to_tensor(x)
  return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))


def _policy_and_value(network: Any, observation: tf.Tensor, legal: tf.Tensor,
                      valid: tf.Tensor, core_state: Any = None):
  """(masked logits, V = Σ sg(π) Q, or an LSTM network's value unrolled
  over time-major `[L, B, ...]` from `core_state`). Rows not `valid` get
  the constant logits of a sure action 0 (what the padding holds):
  log π = 0, H = 0."""
  if networks_lib.is_recurrent(network):
    out, _ = network.unroll(observation, snt.LSTMState(
        hidden=core_state['hidden'], cell=core_state['cell']))
  else:
    out = network(observation)
  logits = networks_lib.masked_logits(out.logits, tf.cast(legal, tf.float32))
  sure = tf.one_hot(tf.zeros_like(valid, tf.int32), tf.shape(logits)[-1],
                    on_value=0.0, off_value=-1e9)
  logits = tf.where(valid[..., None], logits, sure)
  if networks_lib.is_recurrent(network):
    return logits, out.value
  pi = tf.stop_gradient(tf.nn.softmax(logits))
  value = tf.reduce_sum(pi * out.q, axis=-1)
  return logits, value


def _transitions(data: Dict[str, tf.Tensor], discount: float):
  """Time-major transitions: (observation [T+1, B, ...], legal, action, r,
  γ d, behaviour log-prob, valid mask), invalid steps zeroed."""
  observation = tf.nest.map_structure(_time_major, data['observation'])
  step_type = _time_major(data['step_type'])[:-1]
  valid = tf.not_equal(step_type, _LAST)                    # [T, B]
  zero = lambda x: tf.where(valid, tf.cast(x, tf.float32), 0.0)  # pylint: disable=g-long-lambda
  return (observation['observation'], observation['legal_actions'],
          tf.cast(_time_major(data['action'])[:-1], tf.int32),
          zero(_time_major(data['reward'])[:-1]),
          zero(discount * tf.cast(_time_major(data['discount'])[:-1],
                                  tf.float32)),
          zero(_time_major(data['extras']['log_prob'])[:-1]), valid)


def _apply(optimizer: Any, network: Any, tape: tf.GradientTape,
           loss: tf.Tensor, max_norm: float):
  params = network.trainable_variables
  gradients = tape.gradient(loss, params)
  gradients, norm = tf.clip_by_global_norm(gradients, max_norm)
  return learners.apply_if_finite(optimizer, gradients, params, loss), norm


def vtrace_loss(network: Any, data: Dict[str, tf.Tensor],
                config: config_lib.Config) -> Dict[str, tf.Tensor]:
  """The IMPALA loss's mean over the valid steps of a batch of items
  (`[B, L]`, as the dataset gives them): {'total', 'policy_loss',
  'baseline_loss', 'entropy', 'mean_rho'}."""
  c = config
  observation, legal, action, r_t, discount_t, mu_log_prob, valid = (
      _transitions(data, c.discount))
  valid_f = tf.cast(valid, tf.float32)
  count = tf.maximum(tf.reduce_sum(valid_f), 1.0)
  scale = tf.cast(tf.size(valid_f), tf.float32) / count
  valid_l = tf.not_equal(_time_major(data['step_type']), _LAST)  # [L, B]
  logits, value = _policy_and_value(
      network, observation, legal, valid_l,
      data.get('core_state'))                               # [L, B, A], [L, B]
  bootstrap = value[-1] * tf.cast(valid_l[-1], tf.float32)  # [B]
  logits, value = logits[:-1], value[:-1]                   # [T, B, A], [T, B]
  out = losses.impala_loss(
      logits, action, mu_log_prob, value * valid_f, bootstrap,
      r_t, discount_t, baseline_cost=c.baseline_cost,
      entropy_cost=c.entropy_cost, clip_rho_threshold=c.clip_rho_threshold,
      clip_pg_rho_threshold=c.clip_rho_threshold)
  rho = tf.exp(tf.minimum(
      losses.categorical_log_prob(logits, action) - mu_log_prob, 20.0))
  return {'total': out.loss * scale,                       # Valid steps' mean.
          'policy_loss': out.extra['policy_loss'] * scale,
          'baseline_loss': out.extra['baseline_loss'] * scale,
          'entropy': tf.reduce_sum(
              losses.categorical_entropy(logits) * valid_f) / count,
          'mean_rho': tf.reduce_sum(rho * valid_f) / count}


def make_vtrace_update(config: config_lib.Config, network: Any,
                       optimizer: Any) -> Callable[[Any], Dict[str, Any]]:
  """One V-trace (IMPALA loss) step per batch: `update(data) -> metrics`."""

  def update(data):
    with tf.GradientTape() as tape:
      metrics = vtrace_loss(network, data, config)
    applied, norm = _apply(optimizer, network, tape, metrics['total'],
                           config.max_gradient_norm)
    return dict(metrics, gradient_norm=norm, applied=applied)

  return tf.function(update, autograph=False)


class PPOUpdate:
  """`ppo_epochs` x `ppo_minibatches` clipped updates per batch:
  `update(data) -> metrics` (means over the minibatches)."""

  def __init__(self, config: config_lib.Config, network: Any, optimizer: Any,
               seed: int = 0):
    self._config, self._network, self._optimizer = config, network, optimizer
    self._seed = seed
    self._prepare = tf.function(self._prepare_impl, autograph=False)
    self._epochs = None  # Built on the first batch, which gives the shapes.

  def _prepare_impl(self, data):
    """GAE on the batch; the valid steps flattened, `[N, ...]`."""
    c = self._config
    observation, legal, action, r_t, discount_t, mu_log_prob, valid = (
        _transitions(data, c.discount))
    _, value = _policy_and_value(self._network, observation[:-1], legal[:-1],
                                 valid)
    value = value * tf.cast(valid, tf.float32)               # [T, B]
    estimate = losses.generalized_advantage_estimation(
        value, tf.zeros_like(value[0]), r_t, discount_t, lambda_=c.gae_lambda)
    flat = lambda x: tf.boolean_mask(x, valid)  # pylint: disable=g-long-lambda
    return (flat(observation[:-1]), flat(legal[:-1]), flat(action),
            flat(mu_log_prob), flat(value), flat(estimate.advantages),
            flat(estimate.returns))

  def _minibatch_impl(self, observation, legal, action, old_log_prob,
                      old_value, advantages, returns):
    c = self._config
    with tf.GradientTape() as tape:
      logits, value = _policy_and_value(
          self._network, observation, legal,
          tf.ones_like(action, dtype=tf.bool))
      out = losses.ppo_loss(
          losses.categorical_log_prob(logits, action), old_log_prob,
          advantages, value, old_value, returns,
          losses.categorical_entropy(logits), clip_epsilon=c.ppo_clip,
          value_clip_epsilon=c.ppo_clip, value_cost=c.baseline_cost,
          entropy_cost=c.entropy_cost)
    applied, norm = _apply(self._optimizer, self._network, tape, out.loss,
                           c.max_gradient_norm)
    return dict(out.extra, total=out.loss, gradient_norm=norm,
                applied=applied)

  def __call__(self, data) -> Dict[str, Any]:
    c = self._config
    steps = [x.numpy() for x in self._prepare(data)]
    if self._epochs is None:
      signature = [tf.TensorSpec((None,) + x.shape[1:], x.dtype)
                   for x in steps]
      self._epochs = learners.MinibatchEpochs(
          tf.function(self._minibatch_impl, input_signature=signature,
                      autograph=False),
          c.ppo_epochs, c.ppo_minibatches, seed=self._seed, min_size=2)
    metrics = self._epochs(*steps)
    out = {k: v for k, v in metrics.items() if not k.startswith('first/')}
    out.update(applied=out.pop('skipped') == 0, samples=len(steps[2]),
               first_minibatch_kl=metrics.get('first/approx_kl', 0.0))
    return out

def make_update(config: config_lib.Config, network: Any, optimizer: Any,
                seed: int = 0) -> Callable[[Any], Dict[str, Any]]:
  """The learner's update for `config.policy_loss` in `POLICY_LOSSES`."""
  if config.policy_loss == 'vtrace':
    return make_vtrace_update(config, network, optimizer)
  if config.policy_loss == 'ppo':
    return PPOUpdate(config, network, optimizer, seed)
  raise ValueError(f'updates.make_update: policy_loss={config.policy_loss!r};'
                   f' this module makes {", ".join(POLICY_LOSSES)}.')
