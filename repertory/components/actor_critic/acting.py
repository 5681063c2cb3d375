"""The actor-critic's evaluation actor: one environment, no adder."""

from typing import Any

import dm_env
import numpy as np

from repertory import core
from repertory.components import variables
from repertory.components.actor_critic import config as config_lib
from repertory.components.actor_critic import networks as networks_lib
from repertory.components.actors import limit_tf_threads


class EvalActor(core.Actor):
  """Acts in one environment with the learner's latest weights."""

  def __init__(self, config: config_lib.ActorCriticConfig,
               spec: Any, variable_source: Any, greedy: bool = True,
               seed: int = 0):
    limit_tf_threads()
    self._policy = networks_lib.Policy(config, spec.observations,
                                       spec.actions, greedy=greedy, seed=seed)
    self._client = variables.VariableClient(variable_source,
                                            networks_lib.POLICY)
    self._state = self._policy.initial_state(1)
    self._first = True

  def select_action(self, observation: Any) -> Any:
    batched = np.asarray(observation)[None]
    action, _, self._state = self._policy.step(
        batched, self._state, np.array([self._first]))
    self._first = False
    return action[0]

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    self._first = True

  def observe(self, action: Any, next_timestep: dm_env.TimeStep) -> None:
    pass

  def update(self, wait: bool = False) -> None:
    self._client.update(wait=wait)
    if self._client.variables:
      self._policy.set_weights(self._client.params)


def make_eval_actor(config: config_lib.ActorCriticConfig, spec: Any,
                    variable_source: Any) -> EvalActor:
  """`make_eval_actor(variable_source)` for the run monitor (use a partial)."""
  return EvalActor(config, spec, variable_source)
