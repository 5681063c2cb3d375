"""Ape-X acting: a batch of environments per policy call, per-actor epsilon,
n-step transitions with actor-computed priorities (Horgan et al. 2018,
"Distributed Prioritized Experience Replay", algorithm 1)."""

import functools
from typing import Any, Callable, List, Optional

import numpy as np

from repertory import core
from repertory.components import adders
from repertory.components.actors import epsilon_greedy as eg
from repertory.agents.prioritized_replay import acting as replay_actor


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


class ApexActor(replay_actor.ReplayActor):
  """Steps `envs_per_actor` environments with one batched policy call.

  Writes n-step transitions through one `NStepTransitionAdder` per
  environment; reports steps to the counter and episodes to the monitor in
  batches.
  """

  def _make_policy(self, spec: Any, make_network: Callable[..., Any]) -> Any:
    return eg.batch_policy(
        lambda: make_network(spec, self._config, build=False),
        spec.observations)

  def _make_adders(self, replay_client: Any, table: str) -> List[Any]:
    config = self._config
    self._priorities = [ApexPriority() for _ in self._envs]
    self._q_values: Optional[np.ndarray] = None
    return [
        adders.NStepTransitionAdder(
            replay_client, n_step=config.n_step, discount=config.discount,
            table=table, actor_id=self._actor_id,
            priority_fn=(p if config.initial_priority == 'actor' else
                         functools.partial(replay_actor.constant_priority,
                                           config.constant_priority)),
            max_in_flight_items=config.max_in_flight_items)
        for p in self._priorities]

  def step(self) -> None:
    """One policy call, then one step in every environment."""
    if self._client.version < 0:
      self._fetch_weights(wait=True)
    if self._q_values is None:
      self._q_values = self._policy(eg.stack(
          [t.observation for t in self._timesteps]))
    q_values = self._q_values
    num_envs = len(self._envs)
    actions = eg.epsilon_greedy(q_values, np.full(num_envs, self._epsilon),
                             self._rng).astype(self._action_dtype)
    next_timesteps = [env.step(a) for env, a in zip(self._envs, actions)]
    ended = [j for j, t in enumerate(next_timesteps) if t.last()]
    firsts = {j: self._envs[j].reset() for j in ended}
    # One call gives the Q-values of the new observations (the bootstrap
    # values of the transitions completed now, and the next actions) and of
    # the first observations of the episodes that start now.
    next_q = self._policy(eg.stack(
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


def make_eval_actor(spec: Any, config: Any,
                    make_network: Callable[[Any, Any], Any],
                    variable_source: Any, seed: int = 0) -> core.Actor:
  """Builds the evaluation actor (picklable through functools.partial)."""
  return eg.GreedyActor(
      lambda: make_network(spec, config, build=False), spec.observations,
      variable_source, config.eval_epsilon, seed=seed)
