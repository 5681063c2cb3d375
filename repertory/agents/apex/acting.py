"""Ape-X acting: a batch of environments per policy call, per-actor epsilon,
n-step transitions with actor-computed priorities (Horgan et al. 2018,
"Distributed Prioritized Experience Replay", algorithm 1)."""

import functools
from typing import Any, Callable, List, Optional, Sequence

import dm_env
import numpy as np
import tensorflow as tf

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components import adders
from repertory.components import evaluation
from repertory.components import networks as networks_lib
from repertory.components import variables as variables_lib
from repertory.components.networks import variables as network_variables

# Actors report their steps and episodes once per this many policy calls.
REPORT_EVERY_CALLS = 50


def apex_epsilon(actor_id: int, num_actors: int, epsilon: float = 0.4,
                 alpha: float = 7.0) -> float:
  """Ape-X's per-actor exploration eps_i = eps ** (1 + alpha * i / (N - 1))
  (Horgan et al. 2018, section 4.1); a single actor gets eps."""
  if not 0 <= actor_id < max(1, num_actors):
    raise ValueError(f'actor_id must be in [0, {num_actors}), got {actor_id}.')
  if num_actors <= 1:
    return float(epsilon)
  return float(epsilon ** (1.0 + alpha * actor_id / (num_actors - 1)))


def limit_tf_threads() -> None:
  """One intra-op and one inter-op thread (actors share two cores)."""
  try:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
  except RuntimeError:  # Already initialised in this process: keep it.
    pass


def epsilon_greedy(q_values: np.ndarray, epsilon: np.ndarray,
                   rng: np.random.RandomState) -> np.ndarray:
  """Per-row epsilon-greedy actions from `[B, A]` Q-values."""
  batch, num_actions = q_values.shape
  greedy = np.argmax(q_values, axis=-1)
  random = rng.randint(num_actions, size=batch)
  explore = rng.uniform(size=batch) < epsilon
  return np.where(explore, random, greedy).astype(np.int32)


class ApexPriority:
  """Initial priority |delta| of an n-step transition from the actor's own
  Q-values (Ape-X, algorithm 1 line 9).

  The actor computes Q(o_{t+n}) on the step that completes the transition
  before it adds that step, and sets `bootstrap_value` to
  max_a Q(o_{t+n}, a); `q_taken` (Q(o_t, a_t)) travels in the item's extras.
  """

  def __init__(self):
    self.bootstrap_value = 0.0

  def __call__(self, item) -> float:
    target = float(item['reward']) + float(item['discount']) * float(
        self.bootstrap_value)
    return abs(target - float(item['extras']['q_taken'])) + 1e-6


class ReplayActor(core.Worker):
  """What the Ape-X and R2D2 actors share: weight fetches (tagging the
  adders' items with the policy version), episode bookkeeping, batched
  reports to the counter and monitor (`ActorReporter`), the run loop and
  shutdown. Subclasses set `_client`, `_policy` (a `GraphFunction`),
  `_adders` and `_epsilon`,
  call `_start_bookkeeping` and implement `step()` (calling
  `_record_step`, `_end_episode` and `_after_call`)."""

  def _start_bookkeeping(self, num_envs: int, counter: Any,
                         monitor: Any) -> None:
    self._reporter = evaluation.ActorReporter(counter, monitor)
    self._num_envs_stepped = num_envs  # Steps per call (the step budget).
    self._returns = np.zeros(num_envs)
    self._lengths = np.zeros(num_envs, np.int64)
    self._done_returns: List[float] = []
    self._done_lengths: List[int] = []
    self._pending_steps = 0
    self._calls = 0

  @property
  def epsilon(self) -> float:
    return self._epsilon

  def _fetch_weights(self, wait: bool) -> None:
    version = self._client.version
    self._client.update(wait=wait)
    if self._client.version != version:
      self._policy.set_weights(self._client.params)
      for adder in self._adders:
        adder.set_policy_version(self._client.version)

  def _record_step(self, j: int, reward: Any) -> None:
    self._returns[j] += float(reward or 0.0)
    self._lengths[j] += 1

  def _end_episode(self, j: int) -> None:
    self._done_returns.append(float(self._returns[j]))
    self._done_lengths.append(int(self._lengths[j]))
    self._returns[j], self._lengths[j] = 0.0, 0

  def _after_call(self, num_steps: int) -> None:
    """Counts one policy call of `num_steps` steps; reports every
    `REPORT_EVERY_CALLS` calls; fetches new weights if due."""
    self._pending_steps += num_steps
    self._calls += 1
    if self._calls % REPORT_EVERY_CALLS == 0:
      self.report()
    self._fetch_weights(wait=False)

  def report(self) -> None:
    """Sends the pending step count and finished episodes (futures)."""
    self._reporter.report(self._pending_steps, self._done_returns,
                          self._done_lengths)
    self._pending_steps = 0
    self._done_returns, self._done_lengths = [], []

  def flush(self) -> None:
    """Sends every item created so far to the table (blocks)."""
    for adder in self._adders:
      adder.flush()

  def run(self) -> None:
    stop = launch.stop_event()
    try:
      while not stop.is_set() and self._reporter.acquire(
          self._num_envs_stepped):
        self.step()
    finally:
      self.close()

  def close(self) -> None:
    self._client.close()
    for adder in self._adders:
      try:
        adder.close()
      except Exception:  # pylint: disable=broad-except
        pass  # The server may already be gone at shutdown.


class ApexActor(ReplayActor):
  """Steps `envs_per_actor` environments with one batched policy call.

  Writes n-step transitions through one `NStepTransitionAdder` per
  environment; reports steps to the counter and episodes to the monitor in
  batches.
  """

  def __init__(self,
               actor_id: int,
               config: Any,
               experiment: Any,
               make_network: Callable[[Any, Any], Any],
               replay_client: Any,
               table: str,
               variable_source: Any,
               counter: Any = None,
               monitor: Any = None):
    limit_tf_threads()
    self._actor_id = actor_id
    self._config = config
    seed = experiment.actor_seed(actor_id)
    self._envs: List[dm_env.Environment] = [
        environments.make(experiment.env, seed=seed + j)
        for j in range(experiment.envs_per_actor)]
    spec = adders.make_environment_spec(self._envs[0])
    self._policy = batch_policy(lambda: make_network(spec, config,
                                                     build=False),
                                spec.observations)
    self._action_dtype = np.dtype(spec.actions.dtype)
    self._client = variables_lib.VariableClient(
        variable_source, 'policy',
        update_period=config.variable_update_period)
    self._epsilon = apex_epsilon(actor_id, experiment.num_actors,
                                 config.epsilon, config.epsilon_alpha)
    self._rng = np.random.RandomState(config.seed * 7919 + seed)
    self._priorities = [ApexPriority() for _ in self._envs]
    self._adders = [
        adders.NStepTransitionAdder(
            replay_client, n_step=config.n_step, discount=config.discount,
            table=table, actor_id=actor_id,
            priority_fn=(p if config.initial_priority == 'actor' else
                         functools.partial(constant_priority,
                                           config.constant_priority)),
            max_in_flight_items=config.max_in_flight_items)
        for p in self._priorities]
    self._timesteps = [env.reset() for env in self._envs]
    for adder, timestep in zip(self._adders, self._timesteps):
      adder.add_first(timestep)
    self._start_bookkeeping(len(self._envs), counter, monitor)
    self._q_values: Optional[np.ndarray] = None

  def step(self) -> None:
    """One policy call, then one step in every environment."""
    if self._client.version < 0:
      self._fetch_weights(wait=True)
    if self._q_values is None:
      self._q_values = self._policy(stack(
          [t.observation for t in self._timesteps]))
    q_values = self._q_values
    num_envs = len(self._envs)
    actions = epsilon_greedy(q_values, np.full(num_envs, self._epsilon),
                             self._rng).astype(self._action_dtype)
    next_timesteps = [env.step(a) for env, a in zip(self._envs, actions)]
    ended = [j for j, t in enumerate(next_timesteps) if t.last()]
    firsts = {j: self._envs[j].reset() for j in ended}
    # One call gives the Q-values of the new observations (the bootstrap
    # values of the transitions completed now, and the next actions) and of
    # the first observations of the episodes that start now.
    next_q = self._policy(stack(
        [t.observation for t in next_timesteps] +
        [firsts[j].observation for j in ended]))
    for j, (adder, timestep) in enumerate(zip(self._adders, next_timesteps)):
      self._priorities[j].bootstrap_value = float(np.max(next_q[j]))
      adder.add(actions[j], timestep,
                extras={'q_taken': np.float32(q_values[j, actions[j]])})
      self._record_step(j, timestep.reward)
    for k, j in enumerate(ended):
      self._end_episode(j)
      next_timesteps[j] = firsts[j]
      next_q[j] = next_q[num_envs + k]
      self._adders[j].add_first(firsts[j])
    self._timesteps = next_timesteps
    self._q_values = next_q[:num_envs]
    self._after_call(num_envs)


def batch_policy(make_network: Callable[[], Any], observation_spec: Any
                 ) -> networks_lib.GraphFunction:
  """The network's Q-values over `[None, ...]` observation batches, numpy
  in and out, in a graph of its own (`GraphFunction`: no TensorFlow objects
  per call, one trace whatever the batch size). `make_network()` builds the
  network without its variables."""
  signature = tf.nest.map_structure(
      lambda s: tf.TensorSpec((None,) + tuple(s.shape), tf.as_dtype(s.dtype)),
      observation_spec)
  return networks_lib.GraphFunction(make_network, lambda net, x: net(x),
                                    [signature])


def constant_priority(value: float, item) -> float:
  """A priority function that ignores the item."""
  del item
  return value


class GreedyActor(core.Actor):
  """A single-environment actor with the learner's weights (evaluation)."""

  def __init__(self, network: Any, variable_source: Any, epsilon: float,
               seed: int = 0):
    limit_tf_threads()
    self._network = network
    self._policy = tf.function(network)
    self._client = variables_lib.VariableClient(variable_source, 'policy')
    self._epsilon = epsilon
    self._rng = np.random.RandomState(seed)

  def select_action(self, observation) -> np.ndarray:
    batched = tf.nest.map_structure(lambda x: np.asarray(x)[None], observation)
    q_values = self._policy(batched).numpy()
    return epsilon_greedy(q_values, np.array([self._epsilon]), self._rng)[0]

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    pass

  def observe(self, action, next_timestep: dm_env.TimeStep) -> None:
    pass

  def update(self, wait: bool = False) -> None:
    version = self._client.version
    self._client.update(wait=wait)
    if self._client.version != version:
      network_variables.assign_variables(self._network, self._client.params)


def make_eval_actor(env: str, config: Any,
                    make_network: Callable[[Any, Any], Any],
                    variable_source: Any) -> core.Actor:
  """Builds the evaluation actor (picklable through functools.partial)."""
  environment = environments.make(env, seed=0)
  spec = adders.make_environment_spec(environment)
  environment.close()
  return GreedyActor(make_network(spec, config), variable_source,
                     config.eval_epsilon, seed=config.seed)


def stack(items: Sequence[Any]) -> Any:
  return tf.nest.map_structure(lambda *xs: np.stack(xs), *items)
