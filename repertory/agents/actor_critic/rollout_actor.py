"""The actor node of round-based actor-critic agents (PPO, A3C): a
`BatchedActor` over an actor's environments with the MLP policy-value
network's acting step in numpy (`numpy_policy.NumpyPolicy`), stepped one
rollout of `unroll_length` steps at a time with weights the agent sets:
PPO's waits for each round's version, A3C's pulls the newest before each
gradient."""

from typing import Any, Optional

from absl import logging

from repertory import launch
from repertory.components import variables
from repertory.agents.actor_critic import numpy_policy
from repertory.components.actors import BatchedActor


class RolloutActor(BatchedActor):
  """Builds the environments and the policy, then calls `_setup()` (the
  agent's); `run()` calls `round(stop)` (the agent's) until the program
  stops or the step budget is spent.

  Args:
    actor_id: this actor's index (recorded in its items, named in logs).
    config: the agent's Config (`unroll_length`; the network's shapes come
      with the learner's weights).
    env: environment spec for `repertory.environments`.
    envs_per_actor: environments stepped per policy call.
    seed: seed of the first environment (the others follow) and of the
      action sampling.
    learner: the learner (client), whose `get_variables` the actor's
      `VariableClient` calls (waiting up to `fetch_timeout_s`).
    counter: optional counter (client): `increment(actor_steps=...)`.
    monitor: optional run monitor (client): `record_episodes(...)`.
    fetch_timeout_s: the `VariableClient`'s fetch timeout (None: the
      config's field named by the class's `FETCH_TIMEOUT_FIELD`).
  """

  FETCH_TIMEOUT_FIELD = 'round_timeout_s'

  def __init__(self, actor_id: int, config: Any, env: str,
               envs_per_actor: int, seed: int, learner: Any,
               counter: Any = None, monitor: Any = None,
               fetch_timeout_s: Optional[float] = None):
    from repertory import environments  # pylint: disable=g-import-not-at-top
    environment = environments.make_batched(env, envs_per_actor, seed=seed)
    self.observation_spec = environment.observation_spec()
    self.action_spec = environment.action_spec()
    self._actor_id = actor_id
    self._config = config
    self._learner = learner
    policy = numpy_policy.NumpyPolicy(seed=seed)
    # The agent fetches and sets the weights (`BatchedActor` refreshes none).
    if fetch_timeout_s is None:
      fetch_timeout_s = getattr(config, self.FETCH_TIMEOUT_FIELD)
    self._weights = variables.VariableClient(
        learner, numpy_policy.POLICY, fetch_timeout_s=fetch_timeout_s)
    self._seed = seed
    # The agent may set `self._adder` after this (it is first used at the
    # first step), from `observation_spec` and `action_spec`.
    super().__init__(environment, policy, None, counter, monitor,
                     report_every=config.unroll_length)
    self._setup()

  def _setup(self) -> None:
    """The agent's own parts (e.g. `self._adder`)."""

  def round(self, stop: Any) -> bool:
    """One round of the agent's; False ends `run()` (a stop while waiting)."""
    raise NotImplementedError

  def acquire(self, steps: int) -> bool:
    """Whether `run()` may start the next round of `steps` environment
    steps: the run's step budget (`ActorReporter.acquire`) by default."""
    return self._reporter.acquire(steps)

  def run(self) -> None:
    stop = launch.stop_event()
    steps = self._config.unroll_length * self._num_envs
    try:
      while not stop.is_set() and self.acquire(steps):
        if not self.round(stop):
          return
    except Exception:  # pylint: disable=broad-except
      if stop.is_set():  # The learner or queue went away while stopping.
        logging.info('Actor %d stopped.', self._actor_id)
        return
      raise
    finally:
      self._environment.close()
