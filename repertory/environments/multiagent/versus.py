"""One player's seat of a game as a single-agent dm_env, against a fixed
opponent that moves inside the environment.

    env = VersusEnvironment(environments.make('openspiel:kuhn_poker'),
                            opponent=RandomOpponent(seed=0), seat='alternate')
    evaluation.evaluate(env, actor, 1000)   # the actor's mean return vs random

The observation is the seat's view ({'observation', 'legal_actions'}), the
reward its own. `seat` is a player index or 'alternate' (seat 0, 1, ...,
in turn per episode, so first-player advantage averages out).
"""

from typing import Any, Callable, Optional, Union

import dm_env
import numpy as np

from repertory.environments.multiagent import base

# opponent(multi-agent timestep, player) -> action.
Opponent = Callable[[dm_env.TimeStep, int], int]


class RandomOpponent:
  """Picks a uniformly random legal action."""

  def __init__(self, seed: Optional[int] = None):
    self._rng = np.random.default_rng(seed)

  def __call__(self, timestep: dm_env.TimeStep, player: int) -> int:
    legal = timestep.observation[base.LEGAL_ACTIONS][player]
    return int(self._rng.choice(np.flatnonzero(legal)))


class VersusEnvironment(dm_env.Environment):
  """The seat's single-agent view of a turn-based game against `opponent`."""

  def __init__(self, env: base.MultiAgentEnvironment, opponent: Opponent,
               seat: Union[int, str] = 'alternate'):
    if env.simultaneous:
      raise ValueError('VersusEnvironment plays turn-based games; '
                       f'{type(env).__name__} is simultaneous.')
    if seat != 'alternate' and not (isinstance(seat, int) and
                                    0 <= seat < env.num_players):
      raise ValueError(f"seat={seat!r}: expected 'alternate' or a player in "
                       f'[0, {env.num_players}).')
    self._env, self._opponent = env, opponent
    self._seat_rule = seat
    self._episodes = 0
    self.seat = 0 if seat == 'alternate' else seat
    self._spec = base.player_spec(env)

  @property
  def environment(self) -> base.MultiAgentEnvironment:
    return self._env

  def _advance(self, timestep, reward: np.ndarray) -> dm_env.TimeStep:
    """Plays the opponents' moves until the seat acts or the game ends."""
    while not timestep.last() and int(
        timestep.observation[base.CURRENT_PLAYER]) != self.seat:
      player = int(timestep.observation[base.CURRENT_PLAYER])
      timestep = self._env.step(self._opponent(timestep, player))
      reward += timestep.reward[self.seat]
    return timestep

  def _view(self, step_type, timestep, reward) -> dm_env.TimeStep:
    observation = base.player_view(timestep, self.seat)
    if step_type == dm_env.StepType.FIRST:
      return dm_env.TimeStep(step_type, None, None, observation)
    discount = np.float32(0.0 if timestep.last() else 1.0)
    return dm_env.TimeStep(step_type, np.float32(reward), discount,
                           observation)

  def reset(self) -> dm_env.TimeStep:
    if self._seat_rule == 'alternate':
      self.seat = self._episodes % self._env.num_players
    self._episodes += 1
    reward = np.zeros((), np.float64)
    timestep = self._advance(self._env.reset(), reward)
    if timestep.last():  # The game ended before the seat moved.
      raise RuntimeError('The game ended before the seat could act.')
    self._pending = float(reward)
    return self._view(dm_env.StepType.FIRST, timestep, None)

  def step(self, action: Any) -> dm_env.TimeStep:
    timestep = self._env.step(int(action))
    reward = np.array(self._pending + timestep.reward[self.seat])
    self._pending = 0.0
    timestep = self._advance(timestep, reward)
    step_type = (dm_env.StepType.LAST if timestep.last()
                 else dm_env.StepType.MID)
    return self._view(step_type, timestep, float(reward))

  def observation_spec(self):
    return self._spec.observations

  def action_spec(self):
    return self._spec.actions

  def reward_spec(self):
    return self._spec.rewards

  def discount_spec(self):
    return self._spec.discounts

  def close(self) -> None:
    self._env.close()

