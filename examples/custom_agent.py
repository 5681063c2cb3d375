r"""A new distributed agent from public components: n-step advantage
actor-critic (Mnih et al. 2016, arXiv:1602.01783, alg. S3) fed by a queue.

  python examples/custom_agent.py --env=catch --lp_launch_type=local_mp

 actor/i --UnrollAdder--> replay (Reverb queue) --make_dataset--> learner
    ^---- FeedForwardActor <-- VariableStore ('policy', versioned) ---'
 counter <-- steps, lag    monitor <-- episodes; stops, evaluates, results.json
"""

import dataclasses
import functools
from typing import Any, Tuple

import tensorflow as tf

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory.components import actors
from repertory.components import adders
from repertory.components import learners
from repertory.components import losses
from repertory.components import networks
from repertory.components import replay as replay_lib

TABLE, POLICY = 'queue', 'policy'


@dataclasses.dataclass
class Config:
  """`batch_size` unrolls of `unroll_length` steps (n of the n-step returns)
  per Adam update; actors fetch weights every `variable_update_period`."""
  unroll_length: int = 20
  batch_size: int = 16
  discount: float = 0.99
  entropy_cost: float = 0.01
  baseline_cost: float = 0.5
  learning_rate: float = 1e-3
  hidden_sizes: Tuple[int, ...] = (64, 64)
  variable_update_period: int = 10
  max_queue_size: int = 64

  def __post_init__(self):
    if not 1 <= self.batch_size <= self.max_queue_size:
      raise ValueError(f'Config.batch_size={self.batch_size} must be in '
                       f'[1, max_queue_size={self.max_queue_size}].')


def make_actor(config: Config, experiment: experiment_lib.ExperimentConfig,
               spec: adders.EnvironmentSpec, actor_id: int, learner: Any,
               replay: Any, counter: Any, monitor: Any) -> actors.BatchedActor:
  """Samples actions for its environments; writes [T + 1] unrolls."""
  n, seed = experiment.envs_per_actor, experiment.actor_seed(actor_id)
  policy = actors.FeedForwardActor(
      networks.mlp_policy_value_network(spec, config.hidden_sizes), learner,
      POLICY, greedy=False, seed=seed,
      update_period=config.variable_update_period)
  adder = adders.UnrollAdder(replay, TABLE, config.unroll_length, n, actor_id,
                             spec)
  return actors.BatchedActor(
      environments.make_batched(experiment.env, n, seed=seed), policy, adder,
      counter, monitor, report_every=config.unroll_length)


class A2C(learners.Algorithm):
  """A2C updates on batches of unrolls (a `LearnerHost` serves, counts,
  logs and stops; see docs/protocols.md)."""

  def __init__(self, config: Config, spec: adders.EnvironmentSpec,
               replay: Any, seed: int = 0):
    self._config = config
    with networks.seeded(seed):
      self._network = networks.mlp_policy_value_network(spec,
                                                        config.hidden_sizes)
    self._optimizer = learners.Adam(config.learning_rate)  # Sonnet's, fused
    dataset = replay_lib.make_dataset(  # Few in flight: they add policy lag.
        replay, TABLE, config.batch_size, prefetch_size=1,
        max_in_flight_samples_per_worker=config.batch_size)
    self._iterator = replay_lib.StarvationLoggingIterator(  # Logs its waits.
        iter(dataset), replay, TABLE)
    self._update = tf.function(self._sgd_step, autograph=False)

  def policy_variables(self):
    return {POLICY: networks.get_variables(self._network)}

  def save(self):
    return {'network': self._network, 'optimizer': self._optimizer}

  def fetch(self, version: int):
    return (next(self._iterator),)  # Outside the host's lock.

  def _sgd_step(self, data):
    """One A2C update on a batch of `UnrollAdder` items."""
    c, network = self._config, self._network
    u = adders.time_major_transitions(data)  # Masks auto-resets. [T, B]
    with tf.GradientTape() as tape:
      outputs = network(u.observation)                           # [T + 1, B]
      logits = outputs.logits[:-1]                               # [T, B, A]
      loss = losses.actor_critic_loss_from_log_probs(
          u.mask * losses.categorical_log_prob(logits, u.action),
          u.mask * losses.categorical_entropy(logits), outputs.value[:-1],
          outputs.value[-1], u.reward, c.discount * u.discount,
          c.baseline_cost, c.entropy_cost)
    gradients = tape.gradient(loss.loss, network.trainable_variables)
    gradients, _ = tf.clip_by_global_norm(gradients, 40.0)
    self._optimizer.apply(gradients, network.trainable_variables)
    return dict(loss.extra, total=loss.loss)

  def step(self, version: int, sample) -> learners.Update:
    lag = replay_lib.policy_lag(sample.data['policy_version'], version)  # [B]
    metrics = self._update(sample.data)
    return learners.Update(
        {**{f'losses/{k}': float(v) for k, v in metrics.items()},
         'charts/policy_lag': lag},
        counts={'learner_steps': 1, 'policy_lag_items': len(lag),
                'policy_lag_sum': int(lag.sum())})


def make_learner(config: Config, spec: adders.EnvironmentSpec, replay: Any,
                 counter: Any, experiment: experiment_lib.ExperimentConfig
                 ) -> learners.LearnerHost:
  """The host checkpoints into `<logdir>/checkpoints` as the experiment's
  checkpoint settings say, and resumes from there on a rerun."""
  return learners.LearnerHost.in_logdir(
      A2C(config, spec, replay, experiment.seed), experiment.logdir,
      snapshot=False,  # A2C exports no SavedModel (`export_snapshot`).
      counter=counter, checkpoint=experiment.checkpoint)


def make_tables(config: Config, spec: adders.EnvironmentSpec) -> list:
  signature = adders.unroll_signature(spec, config.unroll_length)
  return [replay_lib.queue_table(TABLE, config.max_queue_size, signature,
                                 batch_size=config.batch_size)]


def make_program(config: Config, experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """The program graph: replay, counter, learner, monitor, actors."""
  program = launch.Program('a2c')
  spec = experiment_lib.environment_spec(experiment.env)
  replay = program.add_node(launch.ReverbNode(
      functools.partial(make_tables, config, spec)), label='replay')
  # With the logdir the counts (the step budget) continue on a rerun.
  counter = experiment_lib.add_counter(program, experiment.logdir)
  learner = program.add_node(launch.CourierNode(
      make_learner, config, spec, replay, counter, experiment),
      label='learner')
  monitor = experiment_lib.add_monitor(  # Evaluates greedily, 1 environment.
      program, experiment, counter, learner, functools.partial(
          actors.FeedForwardActor, functools.partial(
              networks.mlp_policy_value_network, spec, config.hidden_sizes)),
      replay=replay)
  for i in range(experiment.num_actors):
    program.add_node(launch.PyClassNode(
        make_actor, config, experiment, spec, i, learner, replay, counter,
        monitor), label='actor')
  return program


if __name__ == '__main__':  # repertory.run's flags; this module is 'a2c'.
  from absl import flags  # pylint: disable=g-import-not-at-top
  from repertory import agents, run  # pylint: disable=g-import-not-at-top
  agents.register('a2c', __name__)  # importlib finds this very module.
  flags.FLAGS.set_default('agent', 'a2c')
  run.run()
