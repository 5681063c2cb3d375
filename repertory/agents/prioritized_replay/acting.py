"""The actor node of replay agents (Ape-X, R2D2): what their actors share
around their own `step()`."""

from typing import Any, Callable, List

import dm_env
import numpy as np

from repertory import core
from repertory import launch
from repertory.components import adders
from repertory.components import evaluation
from repertory.components import variables
from repertory.components.actors import epsilon_greedy
from repertory.components.actors.feed_forward import limit_tf_threads

# Actors report their steps and episodes once per this many policy calls.
REPORT_EVERY_CALLS = 50


def constant_priority(value: float, item) -> float:
  """A priority function that ignores the item."""
  del item
  return value


class ReplayActor(core.Worker):
  """What the Ape-X and R2D2 actors share: their construction (environments
  `seed + j`, the variable client, the per-actor epsilon, one adder per
  environment), weight fetches (tagging the adders' items with the policy
  version), episode bookkeeping, batched reports to the counter and monitor
  (`ActorReporter`), the run loop and shutdown.

  A subclass implements `_make_policy(spec, make_network)` (a
  `GraphFunction`), `_make_adders(replay_client, table)` and `step()`
  (calling `_record_step`, `_end_episode` and `_after_call`); it may set
  `make_environment(env, seed)` (default `environments.make`) and extend
  `_start` for state of its own.

  Args:
    actor_id: this actor's index (its epsilon, its items' actor id).
    config: the agent's `PrioritizedReplayConfig`.
    experiment: the run's settings (env, envs_per_actor, num_actors, seeds).
    make_network: the agent's `make_network(spec, config, build=...)`.
    replay_client: a Reverb client of the server holding `table`.
    table: the prioritized table.
    variable_source: the learner (handle).
    counter, monitor: optional counter and run monitor (handles).
  """

  @staticmethod
  def make_environment(env: str, seed: int) -> dm_env.Environment:
    from repertory import environments  # pylint: disable=g-import-not-at-top
    return environments.make(env, seed=seed)

  def __init__(self,
               actor_id: int,
               config: Any,
               experiment: Any,
               make_network: Callable[..., Any],
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
        self.make_environment(experiment.env, seed + j)
        for j in range(experiment.envs_per_actor)]
    spec = adders.make_environment_spec(self._envs[0])
    self._action_dtype = np.dtype(spec.actions.dtype)
    self._policy = self._make_policy(spec, make_network)
    self._client = variables.VariableClient(
        variable_source, 'policy',
        update_period=config.variable_update_period)
    self._epsilon = epsilon_greedy.apex_epsilon(
        actor_id, experiment.num_actors, config.epsilon, config.epsilon_alpha)
    self._rng = np.random.RandomState(seed)
    self._adders = adders.PerEnvironmentAdder(
        self._make_adders(replay_client, table))
    self._start()
    self._start_bookkeeping(len(self._envs), counter, monitor)

  def _make_policy(self, spec: Any, make_network: Callable[..., Any]) -> Any:
    raise NotImplementedError

  def _make_adders(self, replay_client: Any, table: str) -> List[Any]:
    """One adder per environment."""
    raise NotImplementedError

  def _start(self) -> None:
    """Resets every environment and starts its adder's episode."""
    self._timesteps = [env.reset() for env in self._envs]
    for adder, timestep in zip(self._adders, self._timesteps):
      adder.add_first(timestep)

  def step(self) -> None:
    raise NotImplementedError

  def _start_bookkeeping(self, num_envs: int, counter: Any,
                         monitor: Any) -> None:
    self._reporter = evaluation.ActorReporter(counter, monitor)
    self._num_envs_stepped = num_envs  # Steps per call (the step budget).
    self._returns = np.zeros(num_envs)
    self._lengths = np.zeros(num_envs, np.int64)
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
      self._adders.set_policy_version(self._client.version)

  def _record_step(self, j: int, reward: Any) -> None:
    self._returns[j] += float(reward or 0.0)
    self._lengths[j] += 1

  def _end_episode(self, j: int) -> None:
    # Handed over at once: counted with the step that finished it.
    self._reporter.add_episodes([float(self._returns[j])],
                                [int(self._lengths[j])])
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
    self._reporter.report(self._pending_steps, [], [])
    self._pending_steps = 0

  def flush(self) -> None:
    """Sends every item created so far to the table (blocks)."""
    self._adders.flush()

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
