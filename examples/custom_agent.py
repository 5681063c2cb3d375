r"""A new distributed agent from public components: n-step advantage
actor-critic (Mnih et al. 2016, arXiv:1602.01783, alg. S3) fed by a queue.

  python examples/custom_agent.py --env=catch --lp_launch_type=local_mp

 actor/i --UnrollAdder--> replay (Reverb queue) --make_dataset--> learner
    ^                                                                 |
    +------ VariableClient <-- VariableStore ('policy', versioned) ---+
 counter <-- steps, lag    monitor <-- episodes; stops, evaluates, results.json
"""

import contextlib
import dataclasses
import functools
import itertools
import os
from typing import Any, Optional, Tuple

from absl import logging
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory import core
from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory.components import adders
from repertory.components import evaluation
from repertory.components import loggers
from repertory.components import losses
from repertory.components import networks
from repertory.components import replay as replay_lib
from repertory.components import variables

TABLE, POLICY = 'queue', 'policy'


@dataclasses.dataclass
class Config:
  """Unrolls of `unroll_length` steps (up to that many steps per return),
  `batch_size` unrolls per Adam update, the loss's `discount` and costs;
  actors fetch weights every `variable_update_period` steps."""
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


def env_specs(env: Any) -> adders.EnvironmentSpec:
  """The specs of one environment of `env` (a spec string or a factory)."""
  with environments.make(env, seed=0) as one:
    return adders.EnvironmentSpec(one.observation_spec(), one.action_spec(),
                                  None, None)


class Policy(core.Actor):
  """The policy-value network acting on `[N, ...]` observations with the
  weights of `variable_source`; alone (one environment, greedy), the run
  monitor's evaluation actor."""

  def __init__(self, config: Config, env: Any, variable_source: Any = None,
               greedy: bool = True, update_period: int = 1):
    if variable_source is not None:  # Acting: many actors share few cores.
      for set_threads in (tf.config.threading.set_intra_op_parallelism_threads,
                          tf.config.threading.set_inter_op_parallelism_threads):
        with contextlib.suppress(RuntimeError):  # TF running already (threads).
          set_threads(1)
    spec = env_specs(env)
    self.network = networks.PolicyValueNetwork(
        networks.MLPTorso(config.hidden_sizes, len(spec.observations.shape)),
        num_actions=spec.actions.num_values)
    self.network(tf.zeros((1,) + spec.observations.shape,
                          spec.observations.dtype))  # Creates the variables.
    self.client = None if variable_source is None else variables.VariableClient(
        variable_source, POLICY, update_period=update_period)

    def sample(observations):
      logits = self.network(observations).logits
      if greedy:  # A Python branch: autograph is not needed.
        return tf.argmax(logits, -1, output_type=tf.int32)
      return tf.random.categorical(logits, 1, tf.int32)[:, 0]
    self._act = tf.function(sample, autograph=False)

  def act(self, observations: np.ndarray) -> np.ndarray:
    return self._act(observations).numpy()

  def select_action(self, observation):
    return self.act(np.asarray(observation)[None])[0]

  def observe_first(self, timestep):
    pass

  def observe(self, action, next_timestep):
    pass

  def update(self, wait: bool = False):
    version = self.client.version
    self.client.update(wait=wait)
    if self.client.version != version:
      networks.assign_variables(self.network, self.client.params)


class Actor(core.Worker):
  """Steps a batch of environments and writes [T + 1] unrolls to the queue."""

  def __init__(self, actor_id: int, config: Config, env: Any, num_envs: int,
               seed: int, learner: Any, replay: Any, counter: Any,
               monitor: Any):
    self._policy = Policy(config, env, learner, greedy=False,
                          update_period=config.variable_update_period)
    self._env = environments.make_batched(env, num_envs, seed=seed)
    self._adder = adders.UnrollAdder(replay, TABLE, config.unroll_length,
                                     num_envs, actor_id, env_specs(env))
    self._episodes = evaluation.EpisodeTracker(num_envs)
    self._reporter = evaluation.ActorReporter(counter, monitor)
    self._unroll_length, self._num_envs = config.unroll_length, num_envs

  def run(self) -> None:
    stop = launch.stop_event()
    try:
      self._policy.update(wait=True)
      timestep = self._env.reset()
      self._adder.add_first(timestep)
      for step in itertools.count(1):
        if stop.is_set():
          break
        self._adder.set_policy_version(self._policy.client.version)
        action = self._policy.act(timestep.observation)
        timestep = self._env.step(action)
        self._adder.add(action, timestep)
        self._episodes.observe(timestep.step_type, timestep.reward)
        if step % self._unroll_length == 0:  # Counts go out once per unroll.
          self._reporter.report(self._unroll_length * self._num_envs,
                                *self._episodes.pop())
        self._policy.update()
    except Exception:  # pylint: disable=broad-except
      if not stop.is_set():  # Reverb going away while stopping is expected.
        raise
    finally:
      self._env.close()


class Learner(core.Learner):
  """A2C updates on batches of unrolls; serves the versioned weights."""

  def __init__(self, config: Config, env: Any, replay: Any, counter: Any,
               logdir: Optional[str] = None):
    self._config, self._counter = config, counter
    self._network = Policy(config, env).network
    self._optimizer = snt.optimizers.Adam(config.learning_rate)
    self._store = variables.VariableStore(
        {POLICY: networks.get_variables(self._network)})  # Version 0.
    self._dataset = replay_lib.make_dataset(  # Ends after 1 s without data.
        replay, TABLE, config.batch_size, prefetch_size=1,
        max_in_flight_samples_per_worker=config.batch_size,
        rate_limiter_timeout_ms=1000)
    self._iterator = iter(self._dataset)
    self._logger = loggers.make_logger('learner', logdir=logdir)
    self._update = tf.function(self._sgd_step, autograph=False)

  def get_variables(self, names) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def _sgd_step(self, data):
    """One A2C update on `[B, T + 1]` unrolls (`UnrollAdder`'s layout)."""
    c, network = self._config, self._network
    time_major = lambda x: tf.experimental.numpy.swapaxes(x, 0, 1)
    # Transition t -> t+1 is not real where t+1 starts a new episode.
    mask = tf.cast(time_major(data['step_type'])[1:] != 0, tf.float32)  # [T,B]
    r_t = mask * time_major(data['reward'])[1:]                          # [T,B]
    discount_t = mask * c.discount * time_major(data['discount'])[1:]    # [T,B]
    actions = time_major(data['action'])[:-1]                            # [T,B]
    with tf.GradientTape() as tape:
      outputs = network(time_major(data['observation']))        # [T + 1, B]
      logits = outputs.logits[:-1]                               # [T, B, A]
      loss = losses.actor_critic_loss_from_log_probs(
          mask * losses.categorical_log_prob(logits, actions),
          mask * losses.categorical_entropy(logits), outputs.value[:-1],
          outputs.value[-1], r_t, discount_t, c.baseline_cost, c.entropy_cost)
    gradients = tape.gradient(loss.loss, network.trainable_variables)
    gradients, _ = tf.clip_by_global_norm(gradients, 40.0)
    self._optimizer.apply(gradients, network.trainable_variables)
    return dict(loss.extra, total=loss.loss)

  def step(self) -> None:
    for waited in itertools.count(1):  # Wait for a batch, saying so.
      try:
        sample = next(self._iterator)
        break
      except (StopIteration, tf.errors.OutOfRangeError):  # 1 s without data.
        self._iterator = iter(self._dataset)
        if launch.stop_event().is_set():
          return
        if waited % 30 == 0:
          logging.info('learner: waited %d s for unrolls in %r.', waited, TABLE)
    lag = self._store.version - sample.data['policy_version'].numpy()  # [B]
    metrics = self._update(sample.data)
    version = self._store.publish({POLICY: networks.get_variables(
        self._network)})
    self._counter.futures.increment(learner_steps=1, policy_lag_items=len(lag),
                                    policy_lag_sum=int(lag.sum()))
    self._logger.write({**{f'losses/{k}': float(v) for k, v in metrics.items()},
                        'learner/version': version,
                        'charts/policy_lag': float(lag.mean())})

  def run(self) -> None:
    stop = launch.stop_event()
    while not stop.is_set():
      try:
        self.step()
      except Exception:  # pylint: disable=broad-except
        if not stop.is_set():  # Reverb going away while stopping is expected.
          raise


def make_tables(config: Config, env: Any) -> list:
  signature = adders.unroll_signature(env_specs(env), config.unroll_length)
  return [replay_lib.queue_table(TABLE, config.max_queue_size, signature,
                                 batch_size=config.batch_size)]


def make_program(config: Config, experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """The program graph: replay, counter, learner, monitor, actors."""
  env, program = experiment.env, launch.Program('a2c')
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(
        functools.partial(make_tables, config, env)))
  counter = experiment_lib.add_counter(program)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        Learner, config, env, replay, counter,
        os.path.join(experiment.logdir, 'learner')))
  monitor = experiment_lib.add_monitor(  # Evaluates with Policy(.., learner).
      program, experiment, counter, learner,
      functools.partial(Policy, config, env), replay=replay)
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.PyClassNode(
          Actor, i, config, env, experiment.envs_per_actor,
          experiment.actor_seed(i), learner, replay, counter, monitor))
  return program


if __name__ == '__main__':
  # The built-in agents' flags and entry point (--env, --num_actors, ...,
  # --config.<field>=...): repertory.run runs this module as agent 'a2c'.
  from absl import flags  # pylint: disable=g-import-not-at-top
  from repertory import agents, run  # pylint: disable=g-import-not-at-top
  agents.register('a2c', __name__)  # importlib finds this very module.
  flags.FLAGS.set_default('agent', 'a2c')
  run.run()
