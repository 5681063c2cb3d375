"""Ape-X DQN learner: prioritized n-step double/dueling Q-learning with
importance weights, asynchronous priority updates and a target network
(Horgan et al. 2018, algorithm 2)."""

import contextlib
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components import adders
from repertory.components import learners
from repertory.components import loggers
from repertory.components import losses
from repertory.components import model_store
from repertory.components import variables as variables_lib
from repertory.components.networks import variables as network_variables
from repertory.components.replay import dataset as replay_dataset
from repertory.components.replay import priorities as replay_priorities

# The learner sends its counts to the counter once per this many steps.
COUNT_EVERY_STEPS = 10


def environment_spec(env: str) -> adders.EnvironmentSpec:
  environment = environments.make(env, seed=0)
  try:
    return adders.make_environment_spec(environment)
  finally:
    environment.close()


class PrioritizedReplayLearner(core.Learner):
  """What the Ape-X and R2D2 learners share around their own `_sgd_step`:
  the online and target networks, Adam, the prioritized dataset, batched
  counter updates, asynchronous priority write-back, the variable source,
  checkpoints and resume (`FaultTolerance`), `step()` and the run loop.

  Subclasses implement `_sgd_step(sample) -> (metrics, keys, priorities,
  policy_versions)`, a `tf.function` whose metrics hold 'applied' (the
  update was finite and applied, `learners.apply_if_finite`).

  Args:
    config: the agent's Config (learning_rate, adam_epsilon, seed,
      batch_size, target_update_period and the checkpoint fields).
    environment_spec: what `make_network(environment_spec, config)` builds
      the network from.
    make_network: builds the (online and target) network, variables created.
    replay_client: a Reverb client of the server holding `table`.
    table: the prioritized table.
    counter: optional counter (handle) for the learner's counts.
    logdir: where the learner's metrics go (None: not logged).
    checkpoint_dir: if set, the learner resumes from the latest checkpoint
      there (networks, optimizer, step, version), checkpoints every
      `config.checkpoint_every_*`, rolls back after `config.max_bad_updates`
      non-finite updates in a row and writes a final checkpoint when the
      program stops.
    publish_period: learner steps between published versions.
  """

  def __init__(self,
               config: Any,
               environment_spec: adders.EnvironmentSpec,
               make_network: Callable[[Any, Any], Any],
               replay_client: Any,
               table: str,
               counter: Any = None,
               logdir: Optional[str] = None,
               checkpoint_dir: Optional[str] = None,
               publish_period: int = 1):
    self._config = config
    tf.random.set_seed(config.seed)
    self._online = make_network(environment_spec, config)
    self._target = make_network(environment_spec, config)
    self._online_vars = list(self._online.trainable_variables)
    self._target_vars = list(self._target.trainable_variables)
    self._copy_target()
    self._optimizer = snt.optimizers.Adam(config.learning_rate,
                                          epsilon=config.adam_epsilon)
    # Create Adam's moments now, so that the step function traces once and
    # a checkpoint has them to restore into.
    self._optimizer._initialize(self._online_vars)  # pylint: disable=protected-access
    self._client = replay_client
    self._table = table
    self._iterator = replay_dataset.StarvationLoggingIterator(
        iter(replay_dataset.make_dataset(replay_client, table,
                                         config.batch_size)),
        replay_client, table)
    self._priorities = replay_priorities.PriorityUpdater(replay_client, table)
    self._store = variables_lib.VariableStore(self._policy_variables())
    self._counter = counter
    self._logger = (loggers.make_logger('learner', logdir=logdir,
                                        steps_key='learner_steps',
                                        time_delta=10.0)
                    if logdir else None)
    self._pending: Dict[str, float] = {}
    self._num_steps = 0
    self._metrics: Dict[str, float] = {}
    self._publish_period = publish_period
    self._guard = None
    if checkpoint_dir is not None:
      self._guard = learners.FaultTolerance(
          model_store.ModelStore(
              checkpoint_dir,
              {'online': self._online, 'target': self._target,
               'optimizer': self._optimizer},
              max_to_keep=config.checkpoints_to_keep,
              checkpoint_every_steps=config.checkpoint_every_steps,
              checkpoint_every_minutes=config.checkpoint_every_minutes),
          self._store, self._policy_variables,
          max_bad_updates=config.max_bad_updates)
      restored = self._guard.resume()
      if restored is not None:
        self._num_steps = restored.step

  def _policy_variables(self) -> Dict[str, Any]:
    return {'policy': network_variables.get_variables(self._online)}

  def _copy_target(self) -> None:
    for target, online in zip(self._target_vars, self._online_vars):
      target.assign(online)

  @property
  def version(self) -> int:
    """The version of the weights served."""
    return self._store.version

  def num_steps(self) -> int:
    """Learner steps taken (continued across resumes)."""
    return self._num_steps

  def metrics(self) -> Dict[str, float]:
    """The last step's metrics (namespaced)."""
    return dict(self._metrics)

  def step(self) -> None:
    """One SGD step on one prioritized batch; writes the new priorities
    back, copies the target network every `target_update_period` steps,
    publishes the weights and counts the step."""
    sample = next(self._iterator)
    lock = (self._guard.lock if self._guard is not None else
            contextlib.nullcontext())
    with lock:
      if self._guard is not None and self._guard.stopped:
        return  # The final checkpoint is written: no update after it.
      metrics, keys, priorities, versions = self._sgd_step(sample)
      applied = bool(metrics.pop('applied'))
      if applied:
        self._priorities.update(keys.numpy(), priorities.numpy())
      self._num_steps += 1
      if self._num_steps % self._config.target_update_period == 0:
        self._copy_target()
      lag = np.maximum(self._store.version - versions.numpy(), 0)
      if applied and self._num_steps % self._publish_period == 0:
        self._store.publish(self._policy_variables())
      if self._guard is not None:
        self._guard.record_update(applied, self._num_steps)
    self._metrics = {k: float(v) for k, v in metrics.items()}
    if self._guard is not None:
      self._metrics.update(self._guard.metrics())
    self._count(learner_steps=1, policy_lag_sum=float(lag.sum()),
                policy_lag_items=int(lag.size))

  def _sgd_step(self, sample):
    raise NotImplementedError

  def _count(self, **counts) -> None:
    for name, value in counts.items():
      self._pending[name] = self._pending.get(name, 0) + value
    if self._num_steps % COUNT_EVERY_STEPS == 0:
      self.flush_counts()
      if self._logger is not None:
        self._logger.write(dict(self._metrics, learner_steps=self._num_steps))

  def flush_counts(self) -> None:
    """Sends the counts not yet sent to the counter."""
    if self._counter is not None and self._pending:
      self._counter.futures.increment(**self._pending)
    self._pending = {}

  def flush_priorities(self) -> None:
    """Waits until queued priority updates reached the table (tests)."""
    self._priorities.flush()

  def checkpoint(self) -> Optional[str]:
    """Writes a checkpoint now (None without checkpoint_dir or when this
    version is on disk already)."""
    return self._guard.checkpoint() if self._guard is not None else None

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def variables_channel_address(self) -> str:
    """`get_variables` over TCP (`VariableClient(transport='tcp')`)."""
    return self._store.variables_channel_address()

  def run(self, num_steps: Optional[int] = None) -> None:
    stop = launch.stop_event()
    try:
      while not stop.is_set():
        self.step()
        if num_steps is not None and self._num_steps >= num_steps:
          return
    except Exception:  # pylint: disable=broad-except
      if stop.is_set():  # The replay server went away at shutdown.
        return
      raise
    finally:
      self._priorities.close()


class ApexLearner(PrioritizedReplayLearner):
  """Samples prioritized n-step transitions and minimises the importance-
  weighted double Q loss; serves its weights as the 'policy' group."""

  # No data-dependent Python control flow: autograph would only add
  # (a lot of) tracing time.
  @tf.function(autograph=False)
  def _sgd_step(self, sample):
    data, info = sample.data, sample.info
    weights = losses.importance_sampling_weights(
        info.probability, info.table_size,
        self._config.importance_sampling_exponent)  # [B]
    target_q_t = self._target(data['next_observation'])  # [B, A]
    with tf.GradientTape() as tape:
      q_tm1 = self._online(data['observation'])  # [B, A]
      selector_q_t = self._online(data['next_observation'])  # [B, A]
      td = losses.double_q_learning(
          q_tm1, data['action'], data['reward'], data['discount'],
          target_q_t, tf.stop_gradient(selector_q_t))
      loss = tf.reduce_mean(weights * td.loss)
    gradients = tape.gradient(loss, self._online_vars)
    gradients, norm = tf.clip_by_global_norm(gradients,
                                             self._config.max_gradient_norm)
    applied = learners.apply_if_finite(self._optimizer, gradients,
                                       self._online_vars, loss)
    priorities = tf.abs(td.td_error) + 1e-6
    return {
        'applied': applied,
        'loss': loss,
        'gradient_norm': norm,
        'q_mean': tf.reduce_mean(q_tm1),
        'priority_mean': tf.reduce_mean(priorities),
    }, info.key, priorities, data['policy_version']
