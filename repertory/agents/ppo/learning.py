"""The synchronous PPO learner (Schulman et al. 2017, arXiv:1707.06347).

One step is one round (`rounds.RoundCollector`): wait for every actor's
unrolls of the current version v; compute GAE(γ, λ) advantages with the
behaviour values the actors stored, bootstrapped with V(o_T) (the learner's
weights are version v, so this is the behaviour value too); run `num_epochs`
epochs of shuffled minibatch updates of the clipped surrogate; the host
publishes v + 1, which releases the actors. Every round publishes exactly
one version (`one_version_per_step`), also one with a skipped (non-finite)
minibatch update.

Unroll layout (`UnrollAdder`): step t holds o_t with the reward and discount
that came with it, and the actor's a_t, log π(a_t|o_t) and V(o_t).
Transition t -> t+1 is not real when step t+1 is FIRST (an automatic reset);
its advantage is made exactly 0, so GAE does not leak across the reset.
"""

from typing import Any, Dict, Optional

from absl import logging
import dm_env
import numpy as np
import tensorflow as tf

from repertory import launch
from repertory.agents.ppo import config as config_lib
from repertory.components import learners
from repertory.components import losses
from repertory.components import networks
from repertory.agents.actor_critic import rounds
from repertory.agents.actor_critic import mlp_policy

_FIRST = int(dm_env.StepType.FIRST)


class PPO(learners.Algorithm):
  """GAE + clipped-surrogate epochs on one round per version."""

  def __init__(self, config: config_lib.Config, spec: Any,
               collector: rounds.RoundCollector, steps_per_round: int,
               anneal_steps: int = 0, seed: int = 0):
    self._config, self._spec, self._collector = config, spec, collector
    self._steps_per_round = steps_per_round
    self._anneal_steps = ((config.anneal_steps or anneal_steps)
                          if (config.anneal_learning_rate or
                              config.anneal_clip_epsilon) else 0)
    with networks.seeded(seed):
      self.network = mlp_policy.make_network(
          config.hidden_sizes, spec.observations, spec.actions,
          config.network)
    self._learning_rate = tf.Variable(config.learning_rate, trainable=False)
    self._clip_epsilon = tf.Variable(config.clip_epsilon, dtype=tf.float32,
                                     trainable=False)
    self.optimizer = learners.Adam(self._learning_rate,
                                   epsilon=config.adam_epsilon)
    learners.create_optimizer_state(self.optimizer,
                                    self.network.trainable_variables)
    # Read at every publish: named once, read in one call.
    self._read_policy = networks.VariableReader(self.network)
    self.rounds = 0
    flat = lambda dtype, *shape: tf.TensorSpec((None,) + shape, dtype)
    # No data-dependent Python control flow: autograph only slows tracing.
    self._minibatch_step = tf.function(self._minibatch_step_impl, [
        flat(tf.as_dtype(spec.observations.dtype), *spec.observations.shape),
        flat(tf.int32), flat(tf.float32), flat(tf.float32), flat(tf.float32),
        flat(tf.float32)], autograph=False)
    # Every epoch's minibatches in one call (the shuffles as before).
    self._epochs = learners.MinibatchEpochs(
        self._minibatch_step, config.num_epochs, config.num_minibatches,
        seed=seed)
    self._advantages = tf.function(self._advantages_impl, autograph=False)

  def policy_variables(self) -> Dict[str, Any]:
    return {mlp_policy.POLICY: self._read_policy()}

  def save(self) -> Dict[str, Any]:
    return {'network': self.network, 'optimizer': self.optimizer}

  def restore(self, restored: Any) -> None:
    self.rounds = restored.step

  def export_snapshot(self, path: str) -> str:
    return mlp_policy.export_snapshot(path, self.network,
                                      self._spec.observations)

  def _advantages_impl(self, observation, reward, discount, step_type, value):
    """GAE on a round: returns (advantages, returns, mask), all `[T, B]`."""
    c = self._config
    v_tm1 = value[:-1]                                            # [T, B]
    bootstrap_value = self.network(observation[-1]).value         # [B]
    mask = tf.not_equal(step_type[1:], _FIRST)                    # [T, B]
    # A masked step gets r = V, γ = 0: its TD error and advantage are 0.
    r_t = tf.where(mask, reward[1:], v_tm1)
    discount_t = tf.where(mask, c.discount * discount[1:], 0.0)
    estimate = losses.generalized_advantage_estimation(
        v_tm1, bootstrap_value, r_t, discount_t, lambda_=c.gae_lambda)
    return estimate.advantages, estimate.returns, mask

  def _minibatch_step_impl(self, observation, action, old_log_prob, old_value,
                           advantages, returns):
    """One clipped-surrogate update on a flat minibatch `[M, ...]`."""
    c = self._config
    with tf.GradientTape() as tape:
      output = self.network(observation)
      log_prob = losses.categorical_log_prob(output.logits, action)
      entropy = losses.categorical_entropy(output.logits)
      loss = losses.ppo_loss(
          log_prob, old_log_prob, advantages, output.value, old_value,
          returns, entropy, clip_epsilon=self._clip_epsilon,
          value_clip_epsilon=c.value_clip_epsilon, value_cost=c.value_cost,
          entropy_cost=c.entropy_cost,
          normalize_advantages=c.normalize_advantages)
    params = self.network.trainable_variables
    gradients = tape.gradient(loss.loss, params)
    if c.max_grad_norm is not None:
      gradients, norm = tf.clip_by_global_norm(gradients, c.max_grad_norm)
    else:
      norm = tf.linalg.global_norm(gradients)
    applied = learners.apply_if_finite(self.optimizer, gradients, params,
                                       loss.loss)
    metrics = {f'losses/{k}': v for k, v in loss.extra.items()}
    metrics.update({'applied': applied, 'losses/total': loss.loss,
                    'charts/gradient_norm': norm})
    return metrics

  def train_on_round(self, batch: Dict[str, np.ndarray]) -> Dict[str, float]:
    """GAE + `num_epochs` x `num_minibatches` updates on one round's batch."""
    c = self._config
    if self._anneal_steps:
      fraction = learners.remaining_fraction(
          self.rounds, self._steps_per_round, self._anneal_steps)
      if c.anneal_learning_rate:
        self._learning_rate.assign(c.learning_rate * fraction)
      if c.anneal_clip_epsilon:
        self._clip_epsilon.assign(c.clip_epsilon * fraction)
    advantages, returns, mask = self._advantages(
        batch['observation'], batch['reward'], batch['discount'],
        batch['step_type'], batch['extras']['value'])
    mask = mask.numpy()                                           # [T, B]
    flat = [batch['observation'][:-1][mask],
            batch['action'][:-1][mask].astype(np.int32),
            batch['extras']['log_prob'][:-1][mask],
            batch['extras']['value'][:-1][mask],
            advantages.numpy()[mask], returns.numpy()[mask]]
    metrics = self._epochs(*flat)
    out = {k: v for k, v in metrics.items() if not k.startswith('first/')}
    out.update({'charts/first_minibatch_kl': metrics.get(
                    'first/losses/approx_kl', 0.0),
                'charts/learning_rate': float(self._learning_rate.numpy()),
                'charts/clip_epsilon': float(self._clip_epsilon.numpy()),
                'charts/samples': len(flat[1]),
                'charts/updates': out.pop('updates'),
                'learner/skipped_updates': out.pop('skipped')})
    return out

  def fetch(self, version: int) -> Optional[tuple]:
    stop = launch.stop_event() if launch.get_launch_type() else None
    batch = self._collector.collect(
        version, lambda: stop is not None and stop.is_set())
    return None if batch is None else (batch,)

  def step(self, version: int, batch: Dict[str, np.ndarray]
           ) -> Optional[learners.Update]:
    lags = version - batch['policy_version']                      # [B]
    # The synchronous guarantee: nothing but version v enters the update. A
    # round the learner republished after (a rollback, a restart) is stale.
    if np.any(lags != 0):
      self._collector.count_dropped(lags.size)
      logging.warning('PPO learner dropped the round of version %d: it now '
                      'serves version %d.', int(batch['policy_version'][0]),
                      version)
      return None
    metrics = self.train_on_round(batch)
    self.rounds += 1
    metrics.update({'rounds': self.rounds,
                    'charts/policy_lag_max': int(lags.max())})
    return learners.Update(
        metrics, counts={'learner_steps': int(metrics['charts/updates']),
                         'policy_lag_sum': float(lags.sum()),
                         'policy_lag_items': int(lags.size),
                         'dropped_stale': self._collector.take_dropped()},
        applied=metrics['learner/skipped_updates'] == 0)


def make_learner(config: config_lib.Config, spec: Any, replay: Any,
                 table: str, num_actors: int, envs_per_actor: int,
                 counter: Any = None, logdir: Optional[str] = None,
                 anneal_steps: int = 0, seed: int = 0,
                 checkpoint: Any = None) -> learners.LearnerHost:
  """The learner node: `PPO` in a `LearnerHost` that publishes one version
  per round. With `logdir`: metrics, checkpoints and the snapshot there."""
  batched = config.batched_items
  collector = rounds.RoundCollector(
      replay, table, num_actors, 1 if batched else envs_per_actor,
      config.round_timeout_s, envs_per_item=envs_per_actor if batched else None)
  algorithm = PPO(config, spec, collector,
                  config.steps_per_round(num_actors, envs_per_actor),
                  anneal_steps=anneal_steps, seed=seed)
  host = learners.LearnerHost.in_logdir(
      algorithm, logdir, counter=counter, checkpoint=checkpoint,
      one_version_per_step=True, count_every_seconds=0.0)
  collector.follow(lambda: host.version)
  return host
