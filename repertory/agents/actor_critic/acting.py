"""The actor-critic's acting step (`make_policy`, in numpy) and its
evaluation actor: one environment, no adder."""

from typing import Any, Tuple

import dm_env
import numpy as np

from repertory import core
from repertory.components import variables
from repertory.agents.actor_critic import config as config_lib
from repertory.agents.actor_critic import numpy_policy


def make_policy(config: config_lib.ActorCriticConfig, seed: int = 0,
                greedy: bool = False
                ) -> Tuple[numpy_policy.LogitsPolicy, Any]:
  """An actor's acting step (its weights still to be set), evaluated in
  numpy (`numpy_policy.LogitsPolicy`: the process needs no TensorFlow), and
  the recurrent state's spec (None: feedforward)."""
  lstm_size = config.lstm_size if config.use_lstm else None
  policy = numpy_policy.LogitsPolicy(greedy=greedy, seed=seed,
                                     activation=config.activation,
                                     lstm_size=lstm_size)
  return policy, (numpy_policy.lstm_state_spec(lstm_size) if lstm_size
                  else None)


class EvalActor(core.Actor):
  """Acts in one environment with the learner's latest weights."""

  def __init__(self, config: config_lib.ActorCriticConfig,
               spec: Any, variable_source: Any, greedy: bool = True,
               seed: int = 0):
    del spec  # The network's shapes come with its weights.
    self._policy, _ = make_policy(config, seed, greedy)
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

  @property
  def version(self) -> int:
    """The version of the weights it acts with (what evaluations name)."""
    return self._client.version


def make_eval_actor(config: config_lib.ActorCriticConfig, spec: Any,
                    variable_source: Any) -> EvalActor:
  """`make_eval_actor(variable_source)` for the run monitor (use a partial)."""
  return EvalActor(config, spec, variable_source)
