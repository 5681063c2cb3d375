"""The learner algorithm of prioritized replay agents (Ape-X, R2D2): online
and target networks, Adam, a prioritized Reverb dataset, priorities written
back asynchronously. An agent adds its own `_sgd_step`:

    class MyQLearner(PrioritizedReplay):
      @tf.function(autograph=False)
      def _sgd_step(self, sample):      # a `reverb.ReplaySample` batch
        with tf.GradientTape() as tape:
          ...                           # loss, priorities from the TD errors
        return self._apply(tape, loss, q_values, priorities, sample)

(`_apply` clips and applies the gradients if finite). Run it in a
`LearnerHost`; the sample is taken in `fetch`, outside the host's lock.
"""

from typing import Any, Callable, Dict, Optional


import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.components.learners import adam
from repertory.components.learners import finite
from repertory.components.learners import algorithm as host
from repertory.components.learners import target as target_lib
from repertory.components.networks import seeding
from repertory.components.networks import variables as network_variables


class PrioritizedReplay(host.Algorithm):
  """Samples a prioritized batch per step and writes its priorities back.

  Args:
    config: the agent's Config (learning_rate, adam_epsilon, batch_size,
      target_update_period).
    spec: what `make_network(spec, config)` builds the network from.
    make_network: builds the (online and target) network, variables created.
    replay_client: a Reverb client of the server holding `table`.
    table: the prioritized table.
    seed: seeds the networks' initial weights.
    publish_period: learner steps between published versions.
  """

  def __init__(self, config: Any, spec: Any,
               make_network: Callable[[Any, Any], Any], replay_client: Any,
               table: str, seed: int = 0, publish_period: int = 1):
    # pylint: disable=g-import-not-at-top
    from repertory.components.replay import dataset as replay_dataset
    from repertory.components.replay import priorities as replay_priorities
    # pylint: enable=g-import-not-at-top
    self._config = config
    with seeding.seeded(seed):
      self._online = make_network(spec, config)
      self._target = make_network(spec, config)
    self._online_vars = list(self._online.trainable_variables)
    # Read at every step's publish: named once, read in one call.
    self._read_online = network_variables.VariableReader(self._online)
    self._target_updates = target_lib.TargetUpdater(
        self._online_vars, self._target.trainable_variables,
        period=config.target_update_period)
    self._target_updates.update()
    self._optimizer = adam.Adam(config.learning_rate,
                                epsilon=config.adam_epsilon)
    # Adam's moments now: the step traces once; a checkpoint restores them.
    finite.create_optimizer_state(self._optimizer, self._online_vars)
    self._iterator = replay_dataset.StarvationLoggingIterator(
        iter(replay_dataset.make_dataset(replay_client, table,
                                         config.batch_size)),
        replay_client, table)
    self._priorities = replay_priorities.PriorityUpdater(replay_client, table)
    self._publish_period = publish_period
    self._steps = 0
    self._sgd_call = None

  @property
  def network(self) -> snt.Module:
    return self._online

  def policy_variables(self) -> Dict[str, Any]:
    return {'policy': self._read_online()}

  def save(self) -> Dict[str, Any]:
    return {'online': self._online, 'target': self._target,
            'optimizer': self._optimizer}

  def restore(self, restored: Any) -> None:
    self._steps = restored.step

  def fetch(self, version: int) -> Optional[tuple]:
    return (next(self._iterator),)

  def step(self, version: int, sample: Any) -> host.Update:
    """One SGD step on `sample`; priorities back, target copy if due."""
    if self._sgd_call is None:  # Batches keep their shapes: trace once.
      self._sgd_call = self._sgd_step.get_concrete_function(sample)
    # The concrete function skips the tf.function's per-call matching of
    # the sample's nest against its traces.
    metrics, keys, priorities, versions = self._sgd_call(sample)
    applied = bool(metrics.pop('applied'))
    if applied:
      self._priorities.update(keys.numpy(), priorities.numpy())
    self._steps += 1
    self._target_updates.maybe_update(self._steps)
    lag = np.maximum(version - versions.numpy(), 0)
    return host.Update(
        {k: float(v) for k, v in metrics.items()},
        counts={'learner_steps': 1, 'policy_lag_sum': float(lag.sum()),
                'policy_lag_items': int(lag.size)},
        applied=applied,
        publish=self._steps % self._publish_period == 0)

  def _sgd_step(self, sample):
    raise NotImplementedError

  def _apply(self, tape: tf.GradientTape, loss: tf.Tensor,
             q_values: tf.Tensor, priorities: tf.Tensor, sample: Any):
    """How every `_sgd_step` ends: the loss's gradients clipped to
    `max_gradient_norm` and applied if finite; returns what `step` takes
    (metrics, keys, new priorities, behaviour versions)."""
    gradients = tape.gradient(loss, self._online_vars)
    gradients, norm = tf.clip_by_global_norm(gradients,
                                             self._config.max_gradient_norm)
    applied = finite.apply_if_finite(self._optimizer, gradients,
                                     self._online_vars, loss)
    metrics = {'applied': applied, 'loss': loss, 'gradient_norm': norm,
               'q_mean': tf.reduce_mean(q_values),
               'priority_mean': tf.reduce_mean(priorities)}
    return (metrics, sample.info.key, priorities,
            sample.data['policy_version'])

  def flush(self) -> None:
    """Waits until queued priority updates reached the table."""
    self._priorities.flush()

  def close(self) -> None:
    self._priorities.close()


def make_learner(algorithm: Callable[..., PrioritizedReplay],
                 make_network: Callable[[Any, Any], Any], config: Any,
                 spec: Any, replay: Any, table: str, counter: Any = None,
                 logdir: Optional[str] = None, seed: int = 0,
                 checkpoint: Any = None) -> Any:
  """The learner node of a replay agent: `algorithm(config, spec,
  make_network, replay, table, seed=seed)` in a `LearnerHost`; with
  `logdir`, metrics and checkpoints there (use with functools.partial)."""
  from repertory.components.learners import host  # pylint: disable=g-import-not-at-top
  return host.LearnerHost.in_logdir(
      algorithm(config, spec, make_network, replay, table, seed=seed),
      logdir, snapshot=False, counter=counter, checkpoint=checkpoint)
