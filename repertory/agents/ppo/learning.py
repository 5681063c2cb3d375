"""The synchronous PPO learner (Schulman et al. 2017, arXiv:1707.06347).

One `step()` is one round:

1. wait until every actor has written its `envs_per_actor` unrolls of the
   current version v to the queue (an unroll of any other version never
   enters the batch; a round that is not complete after `round_timeout_s`
   fails, naming the missing actors);
2. compute GAE(γ, λ) advantages with the behaviour values stored by the
   actors, bootstrapped with V(o_T) (the learner's weights are version v, so
   this is the behaviour value too);
3. run `num_epochs` epochs of shuffled minibatch updates of the clipped
   surrogate with value clipping and an entropy bonus;
4. publish version v + 1, which releases the actors for the next round.

A minibatch update with a non-finite loss or gradient is skipped (weights
and Adam's state untouched). With a `checkpoint_dir` the learner resumes
from its latest checkpoint (round count and version continue), checkpoints
every `checkpoint_every_*`, writes a final checkpoint when the program stops,
and after `max_bad_updates` rounds in a row with a skipped update rolls back
to its latest checkpoint (`repertory.components.learners.FaultTolerance`).
Every round publishes exactly one new version (a rollback's republish is
that round's), so the actors' rounds stay in step.

Unroll layout (`UnrollAdder`): step t holds o_t with the reward and discount
that came with it, and the action a_t, log π(a_t|o_t) and V(o_t) of the
actor. Transition t -> t+1 is (a_t, reward[t+1], discount[t+1]); it is not a
real transition when step t+1 is FIRST (an automatic reset), and such steps
are masked out (their advantage is made exactly 0, so GAE does not leak
across the reset).
"""

import collections
import contextlib
import queue as queue_lib
import threading
import time
from typing import Any, Dict, Optional, Sequence

from absl import logging
import dm_env
import numpy as np
import sonnet as snt
import tensorflow as tf
import tree

from repertory import core
from repertory import launch
from repertory.agents.ppo import config as config_lib
from repertory.agents.ppo import networks as networks_lib
from repertory.components import learners
from repertory.components import losses
from repertory.components import model_store
from repertory.components import networks
from repertory.components.loggers import make_logger
from repertory.components import replay as replay_lib
from repertory.components import variables

_FIRST = int(dm_env.StepType.FIRST)
# How long one attempt to read from the queue blocks before the learner
# checks the stop event and the round deadline.
_POLL_S = 1.0


class RoundTimeoutError(TimeoutError):
  """A round did not complete: some actors' unrolls never arrived."""


class PolicyLagError(RuntimeError):
  """An unroll of another version than the round's reached the learner."""


class PPOLearner(core.Learner):
  """Synchronous PPO: one round per version, policy lag exactly 0.

  Serves `get_variables(['policy'])` and `wait_for_version(v, timeout_s)`
  to the actors while it trains; `run()` loops `step()` (one round) until
  the program stops.
  """

  def __init__(self,
               config: config_lib.Config,
               observation_spec: Any,
               action_spec: Any,
               replay: Any,
               table: str,
               num_actors: int,
               envs_per_actor: int,
               counter: Any = None,
               logdir: Optional[str] = None,
               anneal_steps: int = 0,
               checkpoint_dir: Optional[str] = None,
               snapshot_dir: Optional[str] = None):
    """Builds the network, the optimizer and the version store.

    Args:
      config: PPO's `Config`.
      observation_spec: the spec of ONE environment's observation.
      action_spec: the spec of ONE environment's discrete action.
      replay: a `reverb.Client` of the server holding `table`.
      table: the queue the actors write their unrolls to.
      num_actors: actors taking part in every round.
      envs_per_actor: unrolls each actor writes per round.
      counter: optional counter (client) for learner counts.
      logdir: where the learner's metrics go.
      anneal_steps: actor steps over which the learning rate anneals to 0
        when `config.anneal_learning_rate` (`config.anneal_steps` wins when
        set); 0 disables annealing.
      checkpoint_dir: if set, resume from the latest checkpoint there,
        checkpoint every `config.checkpoint_every_*` rounds/minutes, roll
        back after `config.max_bad_updates` bad rounds in a row, and write a
        final checkpoint when the program stops.
      snapshot_dir: if set, a greedy policy snapshot (SavedModel) is
        exported there when the program stops.
    """
    if num_actors < 1 or envs_per_actor < 1:
      raise ValueError(f'PPOLearner needs num_actors >= 1 and envs_per_actor '
                       f'>= 1, got {num_actors} and {envs_per_actor}.')
    tf.random.set_seed(config.seed)
    self._config = config
    self._num_actors = num_actors
    self._envs_per_actor = envs_per_actor
    self._items_per_round = config.items_per_round(num_actors, envs_per_actor)
    self._steps_per_round = config.steps_per_round(num_actors, envs_per_actor)
    self._anneal_steps = ((config.anneal_steps or anneal_steps)
                          if config.anneal_learning_rate else 0)
    self._network = networks_lib.make_network(
        config.hidden_sizes, observation_spec, action_spec)
    self._learning_rate = tf.Variable(config.learning_rate, dtype=tf.float32,
                                      trainable=False)
    self._optimizer = snt.optimizers.Adam(self._learning_rate,
                                          epsilon=config.adam_epsilon)
    self._store = variables.VariableStore(
        {networks_lib.POLICY: networks.get_variables(self._network)})
    self._replay = replay
    self._table = table
    self._counter = counter
    self._logger = make_logger('learner', logdir, time_delta=10.0)
    self._rng = np.random.RandomState(config.seed)
    self._unrolls = None
    self._rounds = 0
    self._updates = 0
    self._dropped = 0
    obs_shape = tuple(observation_spec.shape)
    obs_dtype = tf.as_dtype(observation_spec.dtype)
    flat = lambda dtype, *shape: tf.TensorSpec((None,) + shape, dtype)
    self._minibatch_step = tf.function(self._minibatch_step_impl,
                                       input_signature=[
                                           flat(obs_dtype, *obs_shape),
                                           flat(tf.int32),
                                           flat(tf.float32),
                                           flat(tf.float32),
                                           flat(tf.float32),
                                           flat(tf.float32)])
    self._advantages = tf.function(self._advantages_impl)
    self._observation_spec = observation_spec
    self._snapshot_dir = snapshot_dir
    self._nonfinite_updates = 0
    self._guard = None
    if checkpoint_dir is not None:
      learners.create_optimizer_state(self._optimizer,
                                      self._network.trainable_variables)
      self._guard = learners.FaultTolerance(
          model_store.ModelStore(
              checkpoint_dir,
              {'network': self._network, 'optimizer': self._optimizer},
              max_to_keep=config.checkpoints_to_keep,
              checkpoint_every_steps=config.checkpoint_every_steps,
              checkpoint_every_minutes=config.checkpoint_every_minutes),
          self._store, self._policy_variables,
          max_bad_updates=config.max_bad_updates)
      restored = self._guard.resume()
      if restored is not None:
        self._rounds = restored.step
    if snapshot_dir is not None and launch.get_launch_type() is not None:
      # After the guard's final checkpoint (stop handlers run in order).
      launch.register_stop_handler(self._final_snapshot)

  # --- VariableSource and round synchronisation ------------------------------

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def variables_channel_address(self) -> str:
    """`get_variables` over TCP (`VariableClient(transport='tcp')`)."""
    return self._store.variables_channel_address()

  @property
  def version(self) -> int:
    """The version of the weights published last (the current round's)."""
    return self._store.version

  @property
  def rounds(self) -> int:
    """Rounds trained (continues from the checkpoint on resume)."""
    return self._rounds

  def _policy_variables(self) -> Dict[str, Any]:
    return {networks_lib.POLICY: networks.get_variables(self._network)}

  def wait_for_version(self, version: int, timeout_s: float = 2.0) -> int:
    """Blocks up to `timeout_s` until `version` is published; returns the
    version served then (smaller than `version` on timeout)."""
    try:
      return self._store.wait_for_version(version, timeout_s)
    except TimeoutError:
      return self._store.version

  # --- one round ------------------------------------------------------------

  def _next_unroll(self, timeout_s: float):
    """The next unroll from the queue, or None if none came in `timeout_s`.

    One reader thread iterates the dataset without a sampling timeout: an
    iterator that ends on a timeout can lose an item it already took from
    the queue, which would stall the round.
    """
    if self._unrolls is None:
      self._unrolls = queue_lib.Queue()
      dataset = replay_lib.make_dataset(
          self._replay, self._table, batch_size=None,
          max_in_flight_samples_per_worker=self._items_per_round,
          num_workers_per_iterator=1)
      threading.Thread(target=self._read, args=(dataset, self._unrolls),
                       daemon=True, name='ppo-queue-reader').start()
    try:
      unroll = self._unrolls.get(timeout=timeout_s)
    except queue_lib.Empty:
      return None
    if isinstance(unroll, Exception):
      self._unrolls = None
      raise unroll
    return unroll

  @staticmethod
  def _read(dataset, unrolls: queue_lib.Queue) -> None:
    try:
      for sample in dataset:
        unrolls.put(tree.map_structure(lambda x: x.numpy(), sample.data))
    except Exception as e:  # pylint: disable=broad-except
      unrolls.put(e)  # Raised in the learner (e.g. the server went away).

  def collect_round(self, stop=None) -> Optional[Dict[str, np.ndarray]]:
    """Waits for every actor's unrolls of the current version.

    Returns the round's batch, time-major (`[T + 1, B, ...]`, B =
    num_actors x envs_per_actor, sorted by actor), or None if `stop` was
    set while waiting.

    Raises:
      RoundTimeoutError: after `round_timeout_s`, naming the missing actors.
      PolicyLagError: on an unroll of a newer version or an extra unroll.
    """
    version = self.version
    per_actor = collections.defaultdict(list)
    received = 0
    start = time.monotonic()
    next_log = start + 10.0
    while received < self._items_per_round:
      unroll = self._next_unroll(_POLL_S)
      if unroll is None:
        if stop is not None and stop.is_set():
          return None
        now = time.monotonic()
        if now - start >= self._config.round_timeout_s:
          raise RoundTimeoutError(
              f'PPO round of version {version} incomplete after '
              f'{now - start:.0f}s: {self._round_status(per_actor)}')
        if now >= next_log:
          logging.info('PPO learner waiting for round %d: %s', version,
                       self._round_status(per_actor))
          next_log = now + 10.0
        continue
      behaviour = int(unroll['policy_version'])
      actor_id = int(unroll['actor_id'])
      if behaviour < version:  # Left over from an earlier round: never used.
        self._dropped += 1
        logging.warning('PPO learner dropped an unroll of version %d from '
                        'actor %d in round %d.', behaviour, actor_id, version)
        continue
      if behaviour > version or not 0 <= actor_id < self._num_actors:
        raise PolicyLagError(
            f'PPO learner at version {version} received an unroll of version '
            f'{behaviour} from actor {actor_id}; actors may only act with the '
            f'published version and ids are 0..{self._num_actors - 1}.')
      if len(per_actor[actor_id]) >= self._envs_per_actor:
        raise PolicyLagError(
            f'PPO actor {actor_id} wrote more than {self._envs_per_actor} '
            f'unrolls of version {version}.')
      per_actor[actor_id].append(unroll)
      received += 1
    unrolls = [u for a in sorted(per_actor) for u in per_actor[a]]
    # Per-step columns [T + 1, ...] -> [T + 1, B, ...]; scalars -> [B].
    return tree.map_structure(
        lambda *xs: np.stack(xs, axis=min(1, np.ndim(xs[0]))), *unrolls)

  def _round_status(self, per_actor) -> str:
    missing = [a for a in range(self._num_actors)
               if len(per_actor.get(a, ())) < self._envs_per_actor]
    have = {a: len(u) for a, u in sorted(per_actor.items())}
    return (f'missing unrolls from actors {missing} (unrolls received per '
            f'actor: {have}; each actor writes {self._envs_per_actor}); '
            f'{replay_lib.table_status(self._replay, self._table)}')

  # --- the update -----------------------------------------------------------

  def _advantages_impl(self, observation, reward, discount, step_type,
                       value):
    """GAE on a round: returns (advantages, returns, mask), all `[T, B]`."""
    c = self._config
    v_tm1 = value[:-1]                                            # [T, B]
    bootstrap_value = self._network(observation[-1]).value        # [B]
    mask = tf.not_equal(step_type[1:], _FIRST)                    # [T, B]
    # A masked step (the action on a LAST observation, ignored by the reset)
    # gets r = V, γ = 0: its TD error and advantage are exactly 0.
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
      output = self._network(observation)
      log_prob = losses.categorical_log_prob(output.logits, action)
      entropy = losses.categorical_entropy(output.logits)
      loss = losses.ppo_loss(
          log_prob, old_log_prob, advantages, output.value, old_value,
          returns, entropy, clip_epsilon=c.clip_epsilon,
          value_clip_epsilon=c.value_clip_epsilon, value_cost=c.value_cost,
          entropy_cost=c.entropy_cost,
          normalize_advantages=c.normalize_advantages)
    params = self._network.trainable_variables
    gradients = tape.gradient(loss.loss, params)
    if c.max_grad_norm is not None:
      gradients, norm = tf.clip_by_global_norm(gradients, c.max_grad_norm)
    else:
      norm = tf.linalg.global_norm(gradients)
    # A non-finite loss or gradient leaves weights and Adam's state alone.
    applied = learners.apply_if_finite(self._optimizer, gradients, params,
                                       loss.loss)
    metrics = {f'losses/{k}': v for k, v in loss.extra.items()}
    metrics['learner/applied'] = applied
    metrics['losses/total'] = loss.loss
    metrics['charts/gradient_norm'] = norm
    return metrics

  def train_on_round(self, batch: Dict[str, np.ndarray]) -> Dict[str, float]:
    """GAE + `num_epochs` x `num_minibatches` updates on one round's batch."""
    c = self._config
    if self._anneal_steps:
      done = self._rounds * self._steps_per_round
      self._learning_rate.assign(
          c.learning_rate * max(0.0, 1.0 - done / self._anneal_steps))
    advantages, returns, mask = self._advantages(
        batch['observation'], batch['reward'], batch['discount'],
        batch['step_type'], batch['extras']['value'])
    mask = mask.numpy()                                           # [T, B]
    flat = {
        'observation': batch['observation'][:-1][mask],
        'action': batch['action'][:-1][mask].astype(np.int32),
        'log_prob': batch['extras']['log_prob'][:-1][mask],
        'value': batch['extras']['value'][:-1][mask],
        'advantages': advantages.numpy()[mask],
        'returns': returns.numpy()[mask],
    }
    num_samples = len(flat['action'])
    sums = collections.defaultdict(float)
    count = 0
    skipped = 0
    first_kl = None
    for _ in range(c.num_epochs):
      order = self._rng.permutation(num_samples)
      for indices in np.array_split(order, c.num_minibatches):
        if not len(indices):
          continue
        metrics = self._minibatch_step(
            flat['observation'][indices], flat['action'][indices],
            flat['log_prob'][indices], flat['value'][indices],
            flat['advantages'][indices], flat['returns'][indices])
        if not bool(metrics.pop('learner/applied')):
          skipped += 1
          logging.warning('PPO learner: non-finite loss or gradient in round '
                          '%d; minibatch update skipped.', self._rounds + 1)
        if first_kl is None:  # Before any update: must be ~0 (lag 0).
          first_kl = float(metrics['losses/approx_kl'])
        for k, v in metrics.items():
          sums[k] += float(v)
        count += 1
        self._updates += 1
    out = {k: v / max(count, 1) for k, v in sums.items()}
    out['charts/first_minibatch_kl'] = first_kl if first_kl is not None else 0.
    out['charts/learning_rate'] = float(self._learning_rate.numpy())
    out['charts/samples'] = num_samples
    out['charts/updates'] = count
    out['learner/skipped_updates'] = skipped
    return out

  def step(self, stop=None) -> Optional[Dict[str, float]]:
    """One round: collect version v's data, train, publish v + 1.

    Returns the round's metrics, or None if `stop` was set while waiting.
    """
    start = time.monotonic()
    version = self.version
    batch = self.collect_round(stop)
    if batch is None:
      return None
    lags = version - batch['policy_version']                      # [B]
    # The synchronous guarantee: nothing but version v enters the update.
    assert np.all(lags == 0), f'policy lag in a PPO batch: {lags}'
    waited = time.monotonic() - start
    with self._guard.lock if self._guard else contextlib.nullcontext():
      if self._guard is not None and self._guard.stopped:
        return None  # The final checkpoint is written: no update after it.
      metrics = self.train_on_round(batch)
      applied = metrics['learner/skipped_updates'] == 0
      if not applied:
        self._nonfinite_updates += 1
      self._rounds += 1
      # Exactly one new version per round: the actors wait for version + 1.
      if applied or self._guard is None:
        self._store.publish(self._policy_variables())
        if self._guard is not None:
          self._guard.record_update(True, self._rounds)
      elif not self._guard.record_update(False, self._rounds):
        self._store.publish(self._policy_variables())
      # else: rolled back; the restored weights were published as the new
      # version.
      new_version = self.version
    metrics['learner/nonfinite_rounds'] = self._nonfinite_updates
    if self._guard is not None:
      metrics['learner/rollbacks'] = self._guard.rollbacks
    metrics.update({
        'rounds': self._rounds,
        'version': new_version,
        'charts/policy_lag_max': int(lags.max()),
        'charts/wait_seconds': waited,
        'charts/round_seconds': time.monotonic() - start,
    })
    self._count(learner_steps=int(metrics['charts/updates']),
                policy_lag_sum=float(lags.sum()),
                policy_lag_items=int(lags.size),
                dropped_stale=self._dropped)
    self._dropped = 0
    self._logger.write(metrics)
    return metrics

  def _count(self, **counts) -> None:
    if self._counter is None:
      return
    # Once per round, and waited for: a round's counts are in the counter
    # when step() returns, so a stop right after it (whose counter writes
    # counts.json) loses none of them.
    self._counter.increment(**counts)

  # --- checkpoints ----------------------------------------------------------

  def rollback(self, version: Optional[int] = None,
               tag: Optional[str] = None) -> int:
    """Restores checkpoint `version` (or `tag`; default: the latest) and
    republishes its weights as a new, higher version, which it returns.

    Call it between rounds (e.g. from the learner's own thread): the actors
    take the new version as the next round's.
    """
    if self._guard is None:
      raise ValueError('rollback() needs a learner built with checkpoint_dir.')
    return self._guard.rollback(version=version, tag=tag)

  def export_snapshot(self, path: str) -> str:
    """Exports the greedy policy as a SavedModel (`repertory.evaluate`)."""
    return networks_lib.export_snapshot(path, self._network,
                                        self._observation_spec)

  def _final_snapshot(self) -> None:
    with self._guard.lock if self._guard else contextlib.nullcontext():
      try:
        logging.info('Policy snapshot exported to %s.',
                     self.export_snapshot(self._snapshot_dir))
      except Exception:  # pylint: disable=broad-except
        logging.exception('Exporting the policy snapshot failed.')

  def run(self) -> None:
    stop = launch.stop_event()
    try:
      while not stop.is_set():
        self.step(stop)
    except Exception:  # pylint: disable=broad-except
      if stop.is_set():  # The queue went away while stopping: expected.
        logging.info('PPO learner stopped while waiting for data.')
        return
      raise
