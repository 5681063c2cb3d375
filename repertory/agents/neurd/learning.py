"""NeuRD's learner (Hennes et al. 2020), or MMD's or A2C's with
`policy_loss`: an algorithm for `learners.LearnerHost`.

One step: a batch of the seat's unrolls from the Reverb queue (`[B, T + 1]`,
`adders.UnrollAdder`), the network over all steps, returns
G_t = r_t + γ d_t G_{t+1} bootstrapped from V(o_T) = Σ_a π Q(o_T, a), the
policy loss of `loss.py` on the legal actions (the mask that ends each
flat view) and one clipped Adam update. MMD with a moving magnet
(`magnet_update_steps`) also runs the magnet network on the batch, and
copies the live network into it every `magnet_update_steps` steps.
"""

import functools
import math
from typing import Any, Dict, Optional

import tensorflow as tf

from repertory.components import adders
from repertory.components import learners
from repertory.components import losses
from repertory.components import networks
from repertory.components import replay
from repertory.components.learners import target as target_lib
from repertory.agents.neurd import config as config_lib
from repertory.agents.neurd import loss as loss_lib
from repertory.agents.neurd import networks as networks_lib


def policy_loss(config: config_lib.Config):
  """The loss function of `config.policy_loss`, its settings bound."""
  common = dict(baseline_cost=config.baseline_cost,
                entropy_cost=config.entropy_cost)
  if config.policy_loss == 'neurd':
    return functools.partial(loss_lib.neurd_loss, clip=config.neurd_clip,
                             **common)
  if config.policy_loss == 'mmd':
    return functools.partial(loss_lib.mmd_loss, clip=config.neurd_clip,
                             magnet_strength=config.magnet_strength, **common)
  return functools.partial(loss_lib.a2c_loss, **common)


class NeuRD(learners.Algorithm):
  """A Q critic and the policy loss of `config.policy_loss`."""

  def __init__(self, config: config_lib.Config, spec: Any, replay_client: Any,
               table: str, seed: int = 0):
    self._config, self._spec = config, spec
    self._replay, self._table = replay_client, table
    self._num_actions = int(spec.actions.num_values)
    with networks.seeded(seed):
      self.network = networks_lib.make_network(config, spec)
    # MMD's moving magnet: a copy of the live network, refreshed every
    # `magnet_update_steps` learner steps (None: the uniform magnet).
    self.magnet, self._magnet_updates = None, None
    if config.policy_loss == 'mmd' and config.magnet_update_steps:
      self.magnet = networks_lib.make_network(config, spec)
      self._magnet_updates = target_lib.TargetUpdater(
          self.network.variables, self.magnet.variables,
          period=config.magnet_update_steps)
      self._magnet_updates.update()
    self._steps = 0  # Learner steps (resumed from a checkpoint's).
    self.learning_rate = tf.Variable(config.learning_rate, trainable=False,
                                     dtype=tf.float32)
    self.optimizer = learners.Adam(self.learning_rate)
    learners.create_optimizer_state(self.optimizer,
                                    self.network.trainable_variables)
    # Read at every publish: named once, read in one call.
    self._read_policy = networks.VariableReader(self.network)
    self._loss = policy_loss(config)
    self._results = learners.HostResults()
    self._iterator = None
    self._train_step = tf.function(self._train_step_fn, autograph=False)

  def policy_variables(self) -> Dict[str, Any]:
    return {networks_lib.POLICY: self._read_policy()}

  def save(self) -> Dict[str, Any]:
    saved = {'network': self.network, 'optimizer': self.optimizer}
    if self.magnet is not None:
      saved['magnet'] = self.magnet
    return saved

  def restore(self, restored: Any) -> None:
    self._steps = restored.step  # The magnet's variables: restored in place.

  def _set_learning_rate(self) -> None:
    """The learning rate of step `self._steps + 1` (Config's decay)."""
    decay = self._config.learning_rate_decay_steps
    if decay:
      self.learning_rate.assign(self._config.learning_rate / math.sqrt(
          1.0 + self._steps / decay))

  def export_snapshot(self, path: str) -> str:
    return networks_lib.export_snapshot(self.network, self._spec, path)

  def _loss_and_metrics(self, data: Dict[str, Any]):
    u = adders.time_major_transitions(data)
    out = self.network(u.observation)                           # [T + 1, B, A]
    legal = networks_lib.legal_actions(u.observation, self._num_actions)
    pi = tf.nn.softmax(loss_lib.masked_logits(out.logits[-1], legal[-1]))
    bootstrap = tf.reduce_sum(pi * out.q[-1], axis=-1)          # [B]
    returns = losses.discounted_returns(                        # [T, B]
        u.reward, self._config.discount * u.discount,
        tf.stop_gradient(bootstrap))
    magnet = ({} if self.magnet is None else
              {'magnet_logits_t': self.magnet(u.observation).logits[:-1]})
    return self._loss(out.logits[:-1], out.q[:-1], legal[:-1], u.action,
                      returns, u.mask, **magnet)

  def _train_step_fn(self, iterator) -> None:
    """One update on the next batch, if one comes within the rate
    limiter's timeout; sends the results to `self._results` as numpy."""
    sample = iterator.get_next_as_optional()

    def on_batch():
      data = sample.get_value().data
      with tf.GradientTape() as tape:
        loss = self._loss_and_metrics(data)
      params = self.network.trainable_variables
      gradients, norm = tf.clip_by_global_norm(
          tape.gradient(loss.loss, params), self._config.max_gradient_norm)
      applied = learners.apply_if_finite(self.optimizer, gradients, params,
                                         loss.loss)
      metrics = {'losses/total': loss.loss, 'charts/gradient_norm': norm,
                 **{f'losses/{k}': v for k, v in loss.extra.items()}}
      self._results.send({'applied': applied, 'metrics': metrics,
                          'policy_version': data['policy_version'],
                          'weights': networks.named_variables(self.network)})
      return tf.constant(True)

    tf.cond(sample.has_value(), on_batch, lambda: tf.constant(False))

  def step(self, version: int) -> Optional[learners.Update]:
    if self._iterator is None:
      # A queue: every sample in flight has left it, so keep few in flight.
      self._iterator = iter(replay.make_dataset(
          self._replay, self._table, self._config.batch_size, prefetch_size=1,
          max_in_flight_samples_per_worker=self._config.batch_size,
          rate_limiter_timeout_ms=1000, drop_remainder=False,
          unbatch_items=self._config.batched_items))
    self._set_learning_rate()
    self._train_step(self._iterator)
    results = self._results.take()
    if results is None:  # No data within the rate limiter's timeout.
      self._iterator = None
      return None
    self._steps += 1
    if self._magnet_updates is not None:
      self._magnet_updates.maybe_update(self._steps)
    lag = version - results['policy_version']                   # [B]
    metrics = {k: float(v) for k, v in results['metrics'].items()}
    metrics['charts/policy_lag'] = float(lag.mean())
    metrics['charts/learning_rate'] = float(self.learning_rate.numpy())
    return learners.Update(
        metrics, counts={'learner_steps': 1, 'policy_lag_items': len(lag),
                         'policy_lag_sum': float(lag.sum())},
        applied=bool(results['applied']),
        variables={networks_lib.POLICY: results['weights']})


def make_learner(config: config_lib.Config, spec: Any, replay_client: Any,
                 table: str, counter: Any = None,
                 logdir: Optional[str] = None, seed: int = 0,
                 checkpoint: Any = None) -> learners.LearnerHost:
  """The learner node: `NeuRD` in a `LearnerHost` (metrics, checkpoints
  per `checkpoint` and the snapshot on stop under `logdir`)."""
  return learners.LearnerHost.in_logdir(
      NeuRD(config, spec, replay_client, table, seed=seed), logdir,
      counter=counter, checkpoint=checkpoint,
      log_every=config.learner_log_every, train=config.train)
