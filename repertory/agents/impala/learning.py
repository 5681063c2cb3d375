"""The V-trace learner of IMPALA (Espeholt et al. 2018, arXiv:1802.01561),
shared by the IMPALA and SEED agents.

One step: sample a batch of unrolls from the Reverb queue, measure the policy
lag of each (learner version - behaviour version), drop those beyond
`max_policy_lag`, unroll the network over all `[T + 1, B]` steps, compute
V-trace targets, apply one clipped Adam update and publish the new weights.

Unroll layout (`repertory.components.adders.UnrollAdder`): step t holds the
timestep o_t (with the reward and discount that came with it) and the
actor's action a_t and behaviour logits on o_t. Transition t -> t+1 is
(a_t, reward[t+1], discount[t+1]); it is not a real transition when step t+1
is FIRST (the batched environment reset there and ignored a_t), and those
are masked out of the loss.
"""

import contextlib
import time
from typing import Any, Dict, Optional, Sequence

from absl import logging
import dm_env
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory import core
from repertory import launch
from repertory.agents.impala import config as config_lib
from repertory.agents.impala import networks as networks_lib
from repertory.components import learners
from repertory.components import losses
from repertory.components import model_store
from repertory.components import networks
from repertory.components import variables

_FIRST = int(dm_env.StepType.FIRST)
# log ρ of masked transitions: exp() is exactly 0 in float32, so V-trace gives
# them ρ = c = 0 (no TD error, the trace is cut) and the policy-gradient
# advantage is 0.
_MASKED_LOG_RHO = -1e9


def _time_major(x: tf.Tensor) -> tf.Tensor:
  """[B, T, ...] -> [T, B, ...]."""
  perm = [1, 0] + list(range(2, x.shape.rank))
  return tf.transpose(x, perm)


def make_logger(label: str, logdir: Optional[str]):
  """The data path's logger if available; a small absl logger otherwise."""
  try:
    from repertory.components import loggers  # pylint: disable=g-import-not-at-top
    make = getattr(loggers, 'make_logger')
  except (ImportError, AttributeError):
    make = None
  if make is not None:
    return make(label, logdir=logdir)
  return _AbslLogger(label)


class _AbslLogger:
  """Writes metrics as one absl log line (fallback)."""

  def __init__(self, label: str):
    self._label = label

  def write(self, values: Dict[str, Any]) -> None:
    logging.info('%s: %s', self._label, ' '.join(
        f'{k}={float(v):.4g}' for k, v in sorted(values.items())))

  def close(self) -> None:
    pass


class VTraceLearner(core.Learner):
  """IMPALA's learner: V-trace, clipped Adam, versioned weights.

  Serves `get_variables(['policy'])` (as a `core.VariableSource`) while it
  trains; `run()` steps until the program stops; `step()` is one update.
  """

  def __init__(self,
               config: config_lib.Config,
               observation_spec: Any,
               action_spec: Any,
               replay: Any,
               table: str,
               counter: Any = None,
               logdir: Optional[str] = None,
               seed: int = 0,
               checkpoint_dir: Optional[str] = None,
               snapshot_dir: Optional[str] = None):
    """Builds the network, the optimizer and the dataset.

    Args:
      config: the agent's `Config`.
      observation_spec: the spec of ONE environment's observation.
      action_spec: the spec of ONE environment's (discrete) action.
      replay: a `reverb.Client` of the server holding `table`.
      table: the queue of unrolls.
      counter: optional `Counter` (or its handle) for learner counts.
      logdir: where the learner's metrics go.
      seed: seeds the network's initial weights.
      checkpoint_dir: if set, the learner resumes from the latest checkpoint
        there, checkpoints every `config.checkpoint_every_*`, rolls back
        after `config.max_bad_updates` non-finite updates in a row, and
        writes a final checkpoint when the program stops.
      snapshot_dir: if set, a policy snapshot (SavedModel, greedy actions)
        is exported there when the program stops (after the final
        checkpoint, within the termination notice).
    """
    tf.random.set_seed(seed)
    self._config = config
    self._network = networks_lib.make_network(config, observation_spec,
                                              action_spec)
    self._recurrent = networks_lib.is_recurrent(self._network)
    self._optimizer = snt.optimizers.Adam(config.learning_rate,
                                          epsilon=config.adam_epsilon)
    self._store = variables.VariableStore({networks_lib.POLICY:
                                           self._weights()})  # Version 0.
    self._replay = replay
    self._table = table
    self._counter = counter
    self._logger = make_logger('learner', logdir)
    self._iterator = None
    self._results = learners.HostResults()
    self._steps = 0
    self._last_log = time.time()
    self._pending = {'learner_steps': 0, 'policy_lag_sum': 0.0,
                     'policy_lag_items': 0, 'dropped_stale': 0}
    self._observation_spec = observation_spec
    self._snapshot_dir = snapshot_dir
    self._nonfinite_updates = 0
    self._guard = None
    # Adam's slots exist before `_train_step` is traced (and before a
    # checkpoint is restored into them).
    learners.create_optimizer_state(self._optimizer,
                                    self._network.trainable_variables)
    if checkpoint_dir is not None:
      self._guard = learners.FaultTolerance(
          model_store.ModelStore(
              checkpoint_dir,
              {'network': self._network, 'optimizer': self._optimizer},
              max_to_keep=config.checkpoints_to_keep,
              checkpoint_every_steps=config.checkpoint_every_steps,
              checkpoint_every_minutes=config.checkpoint_every_minutes),
          self._store, lambda: {networks_lib.POLICY: self._weights()},
          max_bad_updates=config.max_bad_updates)
      restored = self._guard.resume()
      if restored is not None:
        self._steps = restored.step
    # The version as the graph sees it, for the policy lag; `_next_results`
    # keeps it equal to the store's.
    self._graph_version = tf.Variable(self.version, dtype=tf.int64,
                                      trainable=False)
    self._graph_version_mirror = self.version
    self._train_step = tf.function(self._train_step_fn)
    if snapshot_dir is not None and launch.get_launch_type() is not None:
      # After the guard's final checkpoint (stop handlers run in order).
      launch.register_stop_handler(self._final_snapshot)

  # --- VariableSource -------------------------------------------------------

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def variables_channel_address(self) -> str:
    """`get_variables` over TCP (`VariableClient(transport='tcp')`)."""
    return self._store.variables_channel_address()

  @property
  def version(self) -> int:
    return self._store.version

  @property
  def network(self) -> snt.Module:
    return self._network

  def _weights(self) -> Dict[str, np.ndarray]:
    return networks.get_variables(self._network)

  # --- checkpoints ----------------------------------------------------------

  def rollback(self, version: Optional[int] = None,
               tag: Optional[str] = None) -> int:
    """Restores checkpoint `version` (or `tag`; default: the latest) and
    republishes its weights as a new, higher version, which it returns."""
    if self._guard is None:
      raise ValueError('rollback() needs a learner built with checkpoint_dir.')
    return self._guard.rollback(version=version, tag=tag)

  def _final_snapshot(self) -> None:
    with self._guard.lock if self._guard else contextlib.nullcontext():
      try:
        logging.info('Policy snapshot exported to %s.',
                     self.export_snapshot(self._snapshot_dir))
      except Exception:  # pylint: disable=broad-except
        logging.exception('Exporting the policy snapshot failed.')

  def export_snapshot(self, path: str) -> str:
    """Exports the greedy policy as a SavedModel (`repertory.evaluate`)."""
    network = self._network
    if self._recurrent:
      def policy(observation, state):
        output, state = network(observation, state)
        return tf.argmax(output.logits, axis=-1, output_type=tf.int32), state
      initial_state = network.initial_state
    else:
      def policy(observation):
        return tf.argmax(network(observation).logits, axis=-1,
                         output_type=tf.int32)
      initial_state = None
    return model_store.export_policy(path, policy, self._observation_spec,
                                     owner=network,
                                     initial_state=initial_state)

  # --- learning -------------------------------------------------------------

  def _dataset(self) -> tf.data.Dataset:
    from repertory.components import replay  # pylint: disable=g-import-not-at-top
    # A queue: every sample in flight has left the queue, so keep few in
    # flight (they only add policy lag).
    return replay.make_dataset(
        self._replay, self._table, self._config.batch_size, prefetch_size=1,
        max_in_flight_samples_per_worker=self._config.batch_size,
        rate_limiter_timeout_ms=1000, drop_remainder=False)

  def _train_step_fn(self, iterator) -> None:
    """Inside `tf.function`: takes the next batch from `iterator` and, if
    there is one, updates on it; sends the results to `self._results`.

    A batch cut short by the rate-limiter timeout (the unrolls taken from
    the queue before the dataset ended) is padded to `batch_size` with
    copies of its first row, which are never kept (masked out of the loss),
    so no unroll that left the queue is lost. It returns nothing (a
    returned tensor would be an EagerTensor per step, see `HostResults`):
    without a batch nothing is sent.
    """
    c = self._config
    sample = iterator.get_next_as_optional()

    def on_batch():
      data = sample.get_value().data
      num_real = tf.shape(tf.nest.flatten(data)[0])[0]

      def pad(x):
        padded = tf.concat([x, tf.repeat(x[:1], c.batch_size - num_real,
                                         axis=0)], 0)
        return tf.ensure_shape(padded, [c.batch_size] + x.shape[1:])
      data = tf.nest.map_structure(pad, data)
      lag = self._graph_version - tf.cast(data['policy_version'], tf.int64)
      keep = tf.range(c.batch_size) < num_real
      if c.max_policy_lag is not None:
        keep = tf.logical_and(keep, lag <= c.max_policy_lag)
      metrics = tf.cond(tf.reduce_any(keep),
                        lambda: self._sgd_step(data, keep),
                        self._no_update_metrics)
      self._graph_version.assign_add(
          tf.cast(metrics['learner/applied'], tf.int64))
      self._results.send({
          'num_real': num_real, 'lag': lag, 'keep': keep,
          'metrics': metrics, 'version': self._graph_version,
          'weights': networks.named_variables(self._network)})
      return tf.constant(True)

    tf.cond(sample.has_value(), on_batch, lambda: tf.constant(False))

  def _no_update_metrics(self) -> Dict[str, tf.Tensor]:
    """`_sgd_step`'s outputs when every unroll of a batch was dropped."""
    zero = tf.constant(0.0)
    return {'learner/applied': tf.constant(False), 'losses/total': zero,
            'losses/policy': zero, 'losses/baseline': zero,
            'losses/entropy': zero, 'charts/gradient_norm': zero,
            'charts/mean_rho': zero, 'charts/mean_vs': zero}

  def _sgd_step(self, data: Dict[str, Any], keep: tf.Tensor
                ) -> Dict[str, tf.Tensor]:
    """One update on a batch of unrolls; `keep` [B] bool drops stale ones."""
    c = self._config
    observation = tf.nest.map_structure(_time_major, data['observation'])
    step_type = _time_major(data['step_type'])                    # [T+1, B]
    actions = _time_major(data['action'])[:-1]                   # [T, B]
    behaviour_logits = _time_major(data['extras']['logits'])[:-1]  # [T, B, A]
    r_t = _time_major(data['reward'])[1:]                         # [T, B]
    discount_t = c.discount * _time_major(data['discount'])[1:]   # [T, B]
    reset = tf.equal(step_type, _FIRST)                           # [T+1, B]
    mask = tf.logical_and(tf.logical_not(reset[1:]), keep[None])  # [T, B]
    maskf = tf.cast(mask, tf.float32)
    state = (data['core_state'] if self._recurrent
             else self._network.initial_state(0))

    with tf.GradientTape() as tape:
      outputs, _ = self._network.unroll(observation, state, reset)
      logits = outputs.logits[:-1]                                # [T, B, A]
      v_tm1 = outputs.value[:-1]                                  # [T, B]
      bootstrap_value = outputs.value[-1]                         # [B]
      target_log_prob = losses.categorical_log_prob(logits, actions)
      behaviour_log_prob = losses.categorical_log_prob(behaviour_logits,
                                                       actions)
      log_rhos = tf.where(mask, target_log_prob - behaviour_log_prob,
                          _MASKED_LOG_RHO)
      returns = losses.vtrace(
          tf.stop_gradient(v_tm1), tf.stop_gradient(bootstrap_value), r_t,
          discount_t, tf.stop_gradient(log_rhos), lambda_=c.vtrace_lambda,
          clip_rho_threshold=c.clip_rho_threshold,
          clip_pg_rho_threshold=c.clip_pg_rho_threshold)
      count = tf.maximum(tf.reduce_sum(maskf), 1.0)
      policy_loss = -tf.reduce_sum(
          maskf * returns.pg_advantages * target_log_prob) / count
      baseline_loss = 0.5 * tf.reduce_sum(
          maskf * tf.square(returns.vs - v_tm1)) / count
      entropy = tf.reduce_sum(
          maskf * losses.categorical_entropy(logits)) / count
      loss = (policy_loss + c.baseline_cost * baseline_loss
              - c.entropy_cost * entropy)

    params = self._network.trainable_variables
    gradients = tape.gradient(loss, params)
    gradients, gradient_norm = tf.clip_by_global_norm(gradients,
                                                      c.max_gradient_norm)
    # A non-finite loss or gradient leaves weights and Adam's state alone.
    applied = learners.apply_if_finite(self._optimizer, gradients, params,
                                       loss)
    return {
        'learner/applied': applied,
        'losses/total': loss,
        'losses/policy': policy_loss,
        'losses/baseline': baseline_loss,
        'losses/entropy': entropy,
        'charts/gradient_norm': gradient_norm,
        'charts/mean_rho': tf.reduce_sum(maskf * tf.exp(log_rhos)) / count,
        'charts/mean_vs': tf.reduce_sum(maskf * returns.vs) / count,
    }

  def _next_results(self, stop=None) -> Optional[Dict[str, Any]]:
    """Runs `_train_step` until a batch came; returns its results (numpy),
    or None if the program stops meanwhile. Holds the guard's lock for the
    step, so no update happens after the final checkpoint."""
    waited = 0.0
    while True:
      if self._iterator is None:
        self._iterator = iter(self._dataset())
      with self._guard.lock if self._guard else contextlib.nullcontext():
        if self._guard is not None and self._guard.stopped:
          return None  # The final checkpoint is written: no update after it.
        if self._graph_version_mirror != self.version:  # Resumed/rolled back.
          self._graph_version.assign(self.version)
          self._graph_version_mirror = self.version
        self._train_step(self._iterator)
        results = self._results.take()
        if results is not None:
          self._graph_version_mirror = int(results['version'])
          self._record(results)
          return results
      # rate_limiter_timeout_ms passed with no data: the iterator ended.
      self._iterator = None
      waited += 1.0
      if stop is not None and stop.is_set():
        return None
      if waited % 30 == 0:
        logging.info('Learner waiting for unrolls in table %r (%.0f s).',
                     self._table, waited)

  def _record(self, results: Dict[str, Any]) -> None:
    """Publishes the weights of an applied update; tells the guard."""
    updated = bool(results['keep'].any())
    applied = bool(results['metrics']['learner/applied'])
    if applied:
      self._store.publish({networks_lib.POLICY: results['weights']})
    elif updated:
      self._nonfinite_updates += 1
      if self._guard is None:
        logging.warning('Non-finite loss or gradient at step %d: update '
                        'skipped.', self._steps + 1)
    self._steps += 1
    if updated and self._guard is not None:
      self._guard.record_update(applied, self._steps)

  def step(self, stop=None) -> Optional[Dict[str, float]]:
    """One learner step; returns its metrics (None if stopped waiting)."""
    results = self._next_results(stop)
    if results is None:
      return None
    num_real = int(results['num_real'])
    lag = results['lag'][:num_real]
    keep = results['keep'][:num_real]
    num_kept = int(keep.sum())
    metrics = {}
    if num_kept:
      metrics = {k: float(v) for k, v in results['metrics'].items()
                 if k != 'learner/applied'}
    metrics['learner/nonfinite_updates'] = self._nonfinite_updates
    metrics.update({
        'learner/steps': self._steps,
        'learner/version': self.version,
        'charts/policy_lag': float(lag[keep].mean()) if num_kept else 0.0,
        'charts/policy_lag_histogram': lag[keep],
        'charts/dropped_stale': int(len(keep) - num_kept),
    })
    self._count(learner_steps=1, policy_lag_sum=float(lag[keep].sum()),
                policy_lag_items=num_kept,
                dropped_stale=int(len(keep) - num_kept))
    if self._steps % self._config.learner_log_every == 0:
      now = time.time()
      metrics['learner/steps_per_second'] = (
          self._config.learner_log_every / max(now - self._last_log, 1e-9))
      self._last_log = now
      self._logger.write(metrics)
    return metrics

  def _count(self, **counts) -> None:
    """Adds to the counter, batching calls to about 10 per second."""
    for key, value in counts.items():
      self._pending[key] += value
    if self._counter is None:
      return
    now = time.monotonic()
    if now - getattr(self, '_last_count', 0.0) < 0.1:
      return
    self._last_count = now
    pending, self._pending = self._pending, {k: 0 for k in self._pending}
    self._count_future = self._counter.futures.increment(**pending)

  def flush_counts(self, wait: bool = True) -> None:
    """Sends counts not yet sent to the counter; with `wait`, blocks until
    every count sent so far (also by a step's increment) has arrived."""
    if self._counter is None:
      return
    future = getattr(self, '_count_future', None)
    if wait and future is not None:
      future.result()  # A step's increment still on its way.
    if any(self._pending.values()):
      pending, self._pending = self._pending, {k: 0 for k in self._pending}
      if wait:
        self._counter.increment(**pending)
      else:
        self._count_future = self._counter.futures.increment(**pending)

  def run(self) -> None:
    stop = launch.stop_event()
    if not self._config.train:  # Serve the initial weights only.
      while not stop.wait(60.0):
        logging.info('Learner with train=False: serving version 0.')
      return
    try:
      while not stop.is_set():
        self.step(stop)
    except Exception:  # pylint: disable=broad-except
      if stop.is_set():  # The queue went away while stopping: expected.
        logging.info('Learner stopped while waiting for data.')
        return
      raise
    finally:
      logging.info('Learner stopping after %d steps (version %d).',
                   self._steps, self.version)
      try:
        self.flush_counts(wait=False)
      except Exception:  # pylint: disable=broad-except
        pass
