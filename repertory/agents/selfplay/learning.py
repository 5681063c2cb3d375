"""The self-play learner: NeuRD (or A2C, or MMD) with an action-value critic on
per-player trajectories; snapshots offered to the league.

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

Self-play with a no-regret rule like NeuRD cycles around an equilibrium of a
zero-sum game; the average of its snapshots (the league's pool, as
fictitious play averages) converges to it.

Every step publishes the weights; the league is offered a snapshot every
min(snapshot_every_steps, 50) steps (`league.maybe_add` adds one on its
schedule or margin).
"""

import os
import time
from typing import Any, NamedTuple, Optional

import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory import core
from repertory import launch
from repertory.agents.selfplay import config as config_lib
from repertory.agents.selfplay import networks as networks_lib
from repertory.components import learners
from repertory.components import loggers
from repertory.components import losses
from repertory.components import model_store
from repertory.components import networks
from repertory.components import replay as replay_lib
from repertory.components import variables

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


class SelfPlayLearner(core.Learner):
  """NeuRD, A2C or MMD updates on batches of per-player trajectories."""

  def __init__(self, config: config_lib.Config, spec: Any, replay: Any,
               counter: Any, league: Any, logdir: Optional[str] = None,
               role: str = 'main'):
    self._config, self._counter, self._league = config, counter, league
    self._role = role
    self._network = networks_lib.make_network(spec, config.hidden_sizes)
    self._learning_rate = tf.Variable(config.learning_rate, trainable=False)
    self._optimizer = snt.optimizers.Adam(self._learning_rate)
    learners.create_optimizer_state(self._optimizer,
                                    self._network.trainable_variables)
    self._magnet = None  # 'mmd' with a moving magnet: the magnet network.
    if config.policy_loss == 'mmd' and config.magnet_update_steps:
      self._magnet = networks_lib.make_network(spec, config.hidden_sizes)
      self._update_magnet()
    saved = {'network': self._network, 'optimizer': self._optimizer}
    if self._magnet is not None:
      saved['magnet'] = self._magnet
    self._store = variables.VariableStore({config_lib.POLICY: self._weights()})
    self._steps = 0
    self._guard = None
    if logdir:
      self._guard = learners.FaultTolerance(
          model_store.ModelStore(
              os.path.join(logdir, 'checkpoints'),
              saved, checkpoint_every_steps=config.checkpoint_every_steps),
          self._store, lambda: {config_lib.POLICY: self._weights()})
      restored = self._guard.resume()
      if restored is not None:
        self._steps = restored.step
    self._replay = replay
    self._iterator = None
    self._logger = loggers.make_logger(
        'learner', os.path.join(logdir, 'learner') if logdir else None,
        steps_key='learner/steps')  # TensorBoard keyed by learner steps.
    self._sgd = tf.function(self._sgd_step, autograph=False)
    self._last_log = time.time()

  def _weights(self):
    return networks.get_variables(self._network)

  def _update_magnet(self) -> None:
    for magnet, live in zip(self._magnet.variables, self._network.variables):
      magnet.assign(live)

  def _set_learning_rate(self) -> None:
    c = self._config
    if c.learning_rate_decay_steps:
      self._learning_rate.assign(c.learning_rate / np.sqrt(
          1.0 + self._steps / c.learning_rate_decay_steps))

  @property
  def version(self) -> int:
    return self._store.version

  def get_variables(self, names) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def variables_channel_address(self) -> str:
    return self._store.variables_channel_address()

  def _sgd_step(self, data):
    c = self._config
    time_major = lambda x: tf.nest.map_structure(  # pylint: disable=g-long-lambda
        lambda t: tf.transpose(t, [1, 0] + list(range(2, t.shape.rank))), x)
    observation = time_major(data['observation'])          # [L, B, ...]
    with tf.GradientTape() as tape:
      out = self._network(observation['observation'])      # [L, B, A]
      magnet = (None if self._magnet is None else
                self._magnet(observation['observation']).logits[:-1])
      loss = selfplay_loss(
          out.logits[:-1], out.q[:-1], observation['legal_actions'][:-1],
          tf.transpose(data['action'])[:-1], tf.transpose(data['reward'])[:-1],
          tf.transpose(data['discount'])[:-1],
          tf.transpose(data['step_type'])[:-1], c, magnet)
    variables_ = self._network.trainable_variables
    gradients = tape.gradient(loss.total, variables_)
    gradients, norm = tf.clip_by_global_norm(gradients, c.max_gradient_norm)
    applied = learners.apply_if_finite(self._optimizer, gradients, variables_,
                                       loss.total)
    return dict(loss._asdict(), gradient_norm=norm, applied=applied)

  def step(self) -> None:
    if self._iterator is None:
      dataset = replay_lib.make_dataset(
          self._replay, config_lib.TABLE, self._config.batch_size,
          prefetch_size=1,
          max_in_flight_samples_per_worker=self._config.batch_size)
      self._iterator = replay_lib.StarvationLoggingIterator(
          iter(dataset), self._replay, config_lib.TABLE)
    sample = next(self._iterator)
    lag = replay_lib.policy_lag(sample.data['policy_version'], self.version)
    self._set_learning_rate()
    metrics = self._sgd(sample.data)
    applied = bool(metrics.pop('applied'))
    if self._guard is not None and self._guard.stopped:
      return
    if applied:
      self._store.publish({config_lib.POLICY: self._weights()})
    self._steps += 1
    c = self._config
    if self._magnet is not None and self._steps % c.magnet_update_steps == 0:
      self._update_magnet()
    if self._guard is not None:
      self._guard.record_update(applied, self._steps)
    self._counter.futures.increment(learner_steps=1,
                                    policy_lag_items=len(lag),
                                    policy_lag_sum=int(lag.sum()))
    if self._steps % min(c.snapshot_every_steps or 50, 50) == 0:
      self._league.futures.maybe_add(self._weights(), self.version,
                                     self._steps, self._role)
    if self._steps % c.learner_log_every == 0:
      record = {f'losses/{k}': float(v) for k, v in metrics.items()}
      record.update({'learner/version': self.version,
                     'learner/steps': self._steps,
                     'charts/policy_lag': float(np.mean(lag)),
                     'charts/learning_rate': float(
                         self._learning_rate.numpy())})
      record.update(self._league.summary())
      self._logger.write(record)

  def run(self) -> None:
    launch.run_until_stop(self.step)
    self._logger.close()
