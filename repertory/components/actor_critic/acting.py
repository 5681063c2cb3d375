"""The actor-critic's acting step (`make_policy`: numpy for a feedforward
network, TensorFlow for an LSTM) and its evaluation actor: one
environment, no adder."""

from typing import Any, Tuple

import dm_env
import numpy as np

from repertory import core
from repertory.components import variables
from repertory.components.actor_critic import config as config_lib
from repertory.components.actor_critic import numpy_policy


def make_policy(config: config_lib.ActorCriticConfig, observation_spec: Any,
                action_spec: Any, seed: int = 0, greedy: bool = False
                ) -> Tuple[Any, Any]:
  """An actor's acting step (its weights still to be set) and the recurrent
  state's spec (None: feedforward). A feedforward network is evaluated in
  numpy (`numpy_policy.LogitsPolicy`: the process needs no TensorFlow),
  an LSTM in TensorFlow (`networks.Policy`)."""
  if not config.use_lstm:
    return numpy_policy.LogitsPolicy(greedy=greedy, seed=seed,
                                     activation=config.activation), None
  # pylint: disable=g-import-not-at-top
  from repertory.components.actor_critic import networks as networks_lib
  from repertory.components.actors import limit_tf_threads
  # pylint: enable=g-import-not-at-top
  limit_tf_threads()
  return (networks_lib.Policy(config, observation_spec, action_spec,
                              greedy=greedy, seed=seed),
          networks_lib.state_spec(config))


class EvalActor(core.Actor):
  """Acts in one environment with the learner's latest weights."""

  def __init__(self, config: config_lib.ActorCriticConfig,
               spec: Any, variable_source: Any, greedy: bool = True,
               seed: int = 0):
    self._policy, _ = make_policy(config, spec.observations, spec.actions,
                                  seed, greedy)
    self._client = variables.VariableClient(variable_source,
                                            numpy_policy.POLICY)
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
