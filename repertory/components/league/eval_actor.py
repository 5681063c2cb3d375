"""What the run monitor of a self-play agent evaluates with: the learner's
seat against a random player (`against_random`), played by `EvalActor`
(the learner's newest weights in numpy: `MLPPolicy`, or a recurrent
player from `make_lstm_policy`, e.g. IMPALA's LSTM network, its state
running through each game)."""

from typing import Any, Callable, Optional

import dm_env
import numpy as np

from repertory import core
from repertory import environments
from repertory.components import variables
from repertory.components.league import policy as policy_lib
from repertory.environments import multiagent


def against_random(env: Any, seed: int) -> multiagent.VersusEnvironment:
  """The alternating seat of game `env` (a spec or factory) against a
  uniformly random player."""
  return multiagent.VersusEnvironment(environments.make(env, seed=seed),
                                      multiagent.RandomOpponent(seed))


class EvalActor(core.Actor):
  """Acts with the learner's latest weights (variable group
  `variable_name`) on one player's view ({'observation',
  'legal_actions'}), e.g. the seat of a `VersusEnvironment`.

  `make_lstm_policy(seed=...)` builds a recurrent numpy player instead of
  `MLPPolicy` (the selfplay agent passes `actor_critic.lstm_policy`'s
  `LSTMPolicy`: initial_state, act, set_weights)."""

  def __init__(self, learner: Any, greedy: bool = False, seed: int = 0,
               make_lstm_policy: Optional[Callable[..., Any]] = None,
               variable_name: str = 'policy'):
    self._client = variables.VariableClient(learner, variable_name)
    self._greedy = greedy
    self._rng = np.random.default_rng(seed)
    self._policy = None
    self._lstm, self._state = None, None
    if make_lstm_policy is not None:
      self._lstm = make_lstm_policy(seed=seed)
      self._state = self._lstm.initial_state(1)

  def select_action(self, observation: Any) -> int:
    if self._lstm is not None:
      action, _, self._state = self._lstm.act(
          observation['observation'][None],
          observation['legal_actions'][None], self._state, self._rng,
          self._greedy)
      return int(action[0])
    action, _ = self._policy.act(observation['observation'][None],
                                 observation['legal_actions'][None],
                                 self._rng, self._greedy)
    return int(action[0])

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    if self._lstm is not None:
      self._state = self._lstm.initial_state(1)

  def observe(self, action: Any, next_timestep: dm_env.TimeStep) -> None:
    pass

  def update(self, wait: bool = False) -> None:
    self._client.update(wait=wait)
    if self._lstm is not None:
      self._lstm.set_weights(self._client.params)
    else:
      self._policy = policy_lib.MLPPolicy(self._client.params)
