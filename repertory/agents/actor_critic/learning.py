"""The V-trace learner of IMPALA and SEED (Espeholt et al. 2018,
arXiv:1802.01561), as an algorithm for `learners.LearnerHost`.

One step: sample a batch of unrolls from the Reverb queue, measure the policy
lag of each (learner version - behaviour version), drop those beyond
`max_policy_lag`, unroll the network over all `[T + 1, B]` steps, compute the
IMPALA loss (APPO's clipped surrogate with `ppo_clip`) on rewards times
`reward_scale` and apply one clipped Adam update (`passes_per_batch` of
them, as APPO's epochs, each on V-trace recomputed with the current network
or, with `targets_once_per_batch`, on targets computed once before them;
learning rate, and with `anneal_ppo_clip` the clip, annealed by
`learners.LinearDecay`, one batch = `batch_size * unroll_length` steps).

Unroll layout (`adders.UnrollAdder`): step t holds o_t (with the reward and
discount that came with it) and the actor's a_t and behaviour logits on o_t.
Transition t -> t+1 is not real when step t+1 is FIRST (the batched
environment reset there); those, and dropped unrolls, are masked out.
"""

from typing import Any, Dict, Optional, Tuple

from absl import logging
import tensorflow as tf

from repertory.components import adders
from repertory.components import learners
from repertory.components import losses
from repertory.components import networks
from repertory.components import replay
from repertory.agents.actor_critic import config as config_lib
from repertory.agents.actor_critic import networks as networks_lib

# log ρ of masked transitions: exp() is exactly 0 in float32, so V-trace gives
# them ρ = c = 0 (no TD error, the trace is cut; the advantage is 0).
_MASKED_LOG_RHO = -1e9
_METRICS = ('losses/total', 'losses/policy', 'losses/baseline',
            'losses/entropy', 'charts/gradient_norm', 'charts/mean_rho',
            'charts/mean_vs', 'charts/clip_fraction')


class VTrace(learners.Algorithm):
  """V-trace, clipped Adam; `step` returns `None` when no batch came."""

  def __init__(self, config: config_lib.ActorCriticConfig, spec: Any,
               replay: Any, table: str, seed: int = 0):
    self._config, self._replay, self._table = config, replay, table
    self._spec = spec
    with networks.seeded(seed):
      self.network = networks_lib.make_network(config, spec.observations,
                                               spec.actions)
    self._recurrent = networks_lib.is_recurrent(self.network)
    self._learning_rate = learners.LinearDecay(
        'learning_rate', config.learning_rate,
        config.batch_size * config.unroll_length,
        config.learning_rate_anneal_steps)
    # APPO's clip, a Variable when annealed with the learning rate.
    self._ppo_clip = learners.LinearDecay(
        'ppo_clip', config.ppo_clip or 0.0,
        config.batch_size * config.unroll_length,
        config.learning_rate_anneal_steps if config.anneal_ppo_clip else 0)
    self.optimizer = learners.Adam(self._learning_rate.value,
                                   epsilon=config.adam_epsilon)
    # Adam's slots exist before a checkpoint is restored into them.
    learners.create_optimizer_state(self.optimizer,
                                    self.network.trainable_variables)
    # Read at every publish: named once, read in one call.
    self._read_policy = networks.VariableReader(self.network)
    self._results = learners.HostResults()
    # The version as the graph sees it (for the lag) and its Python mirror.
    self._version = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._mirror = 0
    self._iterator, self._waited = None, 0
    self._element_spec = None
    # Unoptimised until the optimised graph is ready (the learner is
    # asynchronous: its updates depend on timing anyway).
    self._train_step = learners.OptimizedLater(
        tf.function(self._train_step_fn, autograph=False),
        self._no_op_args, unoptimized_calls=None)

  def policy_variables(self) -> Dict[str, Any]:
    return {networks_lib.POLICY: self._read_policy()}

  def save(self) -> Dict[str, Any]:
    return {'network': self.network, 'optimizer': self.optimizer}

  def export_snapshot(self, path: str) -> str:
    return networks_lib.export_snapshot(self.network, self._spec.observations,
                                        path)

  def _dataset(self) -> tf.data.Dataset:
    # A queue: every sample in flight has left it, so keep few in flight.
    return replay.make_dataset(
        self._replay, self._table, self._config.batch_size, prefetch_size=1,
        max_in_flight_samples_per_worker=self._config.batch_size,
        rate_limiter_timeout_ms=1000, drop_remainder=False,
        unbatch_items=self._config.batched_items)

  def _train_step_fn(self, iterator) -> None:
    """Updates on the next batch, if one comes within the rate limiter's
    timeout, and sends the results to `self._results` (numpy: no
    EagerTensor per step, see `HostResults`). A batch cut short by that
    timeout is padded with copies of its first row, masked out."""
    c = self._config
    sample = iterator.get_next_as_optional()

    def on_batch():
      data, num_real = replay.pad_batch(sample.get_value().data, c.batch_size)
      lag = self._version - tf.cast(data['policy_version'], tf.int64)  # [B]
      keep = tf.range(c.batch_size) < num_real
      if c.max_policy_lag is not None:
        keep = tf.logical_and(keep, lag <= c.max_policy_lag)
      metrics = tf.cond(tf.reduce_any(keep),
                        lambda: self._sgd_step(data, keep),
                        self._no_update_metrics)
      self._results.send({
          'num_real': num_real, 'lag': lag, 'keep': keep, 'metrics': metrics,
          'weights': networks.named_variables(self.network)})
      return tf.constant(True)

    tf.cond(sample.has_value(), on_batch, lambda: tf.constant(False))

  def _no_op_args(self) -> Tuple[Any]:
    """An iterator that yields nothing: the step finds no batch."""
    spec = self._element_spec
    return (iter(tf.data.Dataset.from_generator(lambda: iter(()),
                                                output_signature=spec)),)

  def _no_update_metrics(self) -> Dict[str, tf.Tensor]:
    zeros = {k: tf.constant(0.0) for k in _METRICS}
    return {'applied': tf.constant(False), **zeros}

  def _sgd_step(self, data: Dict[str, Any], keep: tf.Tensor
                ) -> Dict[str, tf.Tensor]:
    """`passes_per_batch` updates on a batch of unrolls; `keep` [B] bool
    drops stale ones. Returns the first pass's metrics (the batch as the
    learner found it); 'applied' is whether that pass was applied."""
    u = adders.time_major_transitions(data)
    mask = u.mask * tf.cast(keep, tf.float32)[None]               # [T, B]
    state = (data['core_state'] if self._recurrent
             else self.network.initial_state(0))
    passes = self._config.passes_per_batch
    # With one pass the pass's own targets are the first network's already.
    returns = (self._vtrace_targets(u, mask, state)
               if self._config.targets_once_per_batch and passes > 1
               else None)
    if passes == 1:
      metrics = self._sgd_pass(u, mask, state, returns)
    else:
      # Every pass in one loop: the graph holds one copy of the update
      # whatever the count (a first pass outside the loop would be a second
      # copy, in the learner's memory); the loop keeps the first's metrics.
      def one_pass(i, first):  # Its update runs: the loop keeps stateful ops.
        metrics = self._sgd_pass(u, mask, state, returns)
        return i + 1, tf.nest.map_structure(
            lambda kept, new: tf.where(i == 0, new, kept), first, metrics)

      _, metrics = tf.while_loop(lambda i, _: i < passes, one_pass,
                                 (tf.constant(0), self._no_update_metrics()))
    self._version.assign_add(tf.cast(metrics['applied'], tf.int64))
    return metrics

  def _log_probs(self, u: adders.UnrollTransitions, mask: tf.Tensor,
                 logits: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """log π(a_t|o_t) of `logits` [T, B, A] and the behaviour's log μ,
    which is log π + 1e9 where masked (log ρ = -1e9 there)."""
    target_log_prob = losses.categorical_log_prob(logits, u.action)
    behaviour_log_prob = tf.where(
        mask > 0, losses.categorical_log_prob(u.extras['logits'], u.action),
        tf.stop_gradient(target_log_prob) - _MASKED_LOG_RHO)
    return target_log_prob, behaviour_log_prob

  def _vtrace_targets(self, u: adders.UnrollTransitions, mask: tf.Tensor,
                      state: Any) -> losses.VTraceReturns:
    """V-trace's targets and advantages under the current network."""
    c = self._config
    outputs, _ = self.network.unroll(u.observation, state, u.first)
    target_log_prob, behaviour_log_prob = self._log_probs(
        u, mask, outputs.logits[:-1])
    return losses.vtrace(
        outputs.value[:-1], outputs.value[-1], c.reward_scale * u.reward,
        c.discount * u.discount, target_log_prob - behaviour_log_prob,
        lambda_=c.vtrace_lambda, clip_rho_threshold=c.clip_rho_threshold,
        clip_pg_rho_threshold=c.clip_pg_rho_threshold,
        pg_advantage=c.pg_advantage)

  def _sgd_pass(self, u: adders.UnrollTransitions, mask: tf.Tensor,
                state: Any, returns: Optional[losses.VTraceReturns] = None
                ) -> Dict[str, tf.Tensor]:
    """One clipped Adam update of the IMPALA loss on time-major unrolls;
    V-trace's targets are `returns`, or computed with the current network."""
    c = self._config
    with tf.GradientTape() as tape:
      outputs, _ = self.network.unroll(u.observation, state, u.first)
      logits = outputs.logits[:-1]                                # [T, B, A]
      target_log_prob, behaviour_log_prob = self._log_probs(u, mask, logits)
      common = dict(
          baseline_cost=c.baseline_cost, entropy_cost=c.entropy_cost,
          lambda_=c.vtrace_lambda, clip_rho_threshold=c.clip_rho_threshold,
          clip_pg_rho_threshold=c.clip_pg_rho_threshold,
          normalize_advantages=c.normalize_advantages, mask=mask,
          returns=returns, pg_advantage=c.pg_advantage)
      inputs = (target_log_prob, behaviour_log_prob,
                mask * losses.categorical_entropy(logits), outputs.value[:-1],
                outputs.value[-1], c.reward_scale * u.reward,
                c.discount * u.discount)
      if c.ppo_clip is None:
        loss = losses.impala_loss_from_log_probs(*inputs, **common)
      else:
        loss = losses.appo_loss_from_log_probs(
            *inputs, ppo_clip=self._ppo_clip.value, **common)
      # Means over the real transitions, not all [T, B] (masked ones add 0).
      scale = tf.size(mask, tf.float32) / tf.maximum(tf.reduce_sum(mask), 1.)
      total = scale * loss.loss
    params = self.network.trainable_variables
    gradients = tape.gradient(total, params)
    gradients, gradient_norm = tf.clip_by_global_norm(gradients,
                                                      c.max_gradient_norm)
    # A non-finite loss or gradient leaves weights and Adam's state alone.
    applied = learners.apply_if_finite(self.optimizer, gradients, params,
                                       total)
    e = loss.extra
    return {'applied': applied, 'losses/total': total,
            'losses/policy': scale * e['policy_loss'],
            'losses/baseline': scale * e['baseline_loss'],
            'losses/entropy': scale * e['entropy'],
            'charts/gradient_norm': gradient_norm,
            'charts/mean_rho': scale * e['mean_rho'],
            'charts/mean_vs': scale * e['mean_vs'],
            'charts/clip_fraction': e['clip_fraction']}

  def step(self, version: int) -> Optional[learners.Update]:
    if self._iterator is None:
      self._iterator = iter(self._dataset())
      self._element_spec = self._iterator.element_spec
    if version != self._mirror:  # Resumed or rolled back meanwhile.
      self._version.assign(version)
      self._mirror = version
    schedule_metrics = {**self._learning_rate.update(self._mirror),
                        **self._ppo_clip.update(self._mirror)}
    self._train_step(self._iterator)
    results = self._results.take()
    if results is None:  # No data within the rate limiter's timeout.
      self._iterator = None
      self._waited += 1
      if self._waited % 30 == 0:
        logging.info('Learner waiting for unrolls in table %r (%d s).',
                     self._table, self._waited)
      return None
    num_real = int(results['num_real'])
    lag, keep = results['lag'][:num_real], results['keep'][:num_real]
    metrics = {k: float(v) for k, v in results['metrics'].items()}
    applied = bool(metrics.pop('applied'))
    num_kept = int(keep.sum())
    self._mirror += int(applied)
    metrics.update(schedule_metrics, **{
        'charts/policy_lag': float(lag[keep].mean()) if num_kept else 0.0,
        'charts/policy_lag_histogram': lag[keep],
        'charts/dropped_stale': num_real - num_kept})
    return learners.Update(
        metrics, counts={'learner_steps': 1, 'policy_lag_items': num_kept,
                         'policy_lag_sum': float(lag[keep].sum()),
                         'dropped_stale': num_real - num_kept},
        applied=applied if num_kept else None,
        variables={networks_lib.POLICY: results['weights']})


def make_learner(config: config_lib.ActorCriticConfig, spec: Any,
                 replay: Any, table: str, counter: Any = None,
                 logdir: Optional[str] = None, seed: int = 0,
                 checkpoint: Any = None) -> learners.LearnerHost:
  """The learner node: `VTrace` in a `LearnerHost`; with `logdir`, metrics
  in `<logdir>/learner`, checkpoints (per `checkpoint`) in
  `<logdir>/checkpoints`, the snapshot on stop in `<logdir>/snapshot`."""
  return learners.LearnerHost.in_logdir(
      VTrace(config, spec, replay, table, seed=seed), logdir,
      counter=counter, checkpoint=checkpoint,
      log_every=config.learner_log_every, train=config.train)
