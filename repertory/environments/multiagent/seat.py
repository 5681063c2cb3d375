"""One seat of a two-player game as a plain single-agent environment: what an
ordinary agent (IMPALA, PPO, a user's own) plays in a league.

    env = SeatEnvironment(environments.make('openspiel:kuhn_poker'),
                          opponent=RandomOpponent(seed=0))
    timestep = env.reset()      # observation: [observation..., legal mask]

The observation is one flat float32 vector: the seat's observation followed
by its legal-action mask (1.0 legal), so a network that knows nothing of
games sees which moves are allowed. An illegal action ends the game as a
loss: the seat's reward is the game's lowest payoff (OpenSpiel's
`min_utility`; -1 where the game does not say). The opponent (a `versus`
opponent: `opponent(multi-agent timestep, player) -> action`) sees the same
flat view through `flat_view`. `seat='alternate'` takes seat 0, 1, ... in
turn per episode.
"""

from typing import Any, Optional, Union

import dm_env
from dm_env import specs
import numpy as np

from repertory.environments.multiagent import base
from repertory.environments.multiagent import versus


def flat_view(timestep: dm_env.TimeStep, player: int) -> np.ndarray:
  """`player`'s observation, flattened, then its legal-action mask."""
  observation = timestep.observation
  return np.concatenate([
      np.asarray(observation[base.OBSERVATION][player],
                 np.float32).reshape(-1),
      np.asarray(observation[base.LEGAL_ACTIONS][player], np.float32)])


def payoff_range(env: base.MultiAgentEnvironment) -> Optional[tuple]:
  """(lowest, highest) payoff of a player, where the game says (OpenSpiel)."""
  game = getattr(env, 'game', None)
  if game is None:
    return None
  return float(game.min_utility()), float(game.max_utility())


def legal_or_random(action: int, timestep: dm_env.TimeStep, player: int,
                    rng: np.random.Generator) -> int:
  """`action` if `player` may take it, else a uniformly random legal one."""
  legal = timestep.observation[base.LEGAL_ACTIONS][player]
  if 0 <= action < len(legal) and legal[action]:
    return int(action)
  return int(rng.choice(np.flatnonzero(legal)))


class SeatEnvironment(dm_env.Environment):
  """A seat of a turn-based game against `opponent`, as flat vectors."""

  def __init__(self, env: base.MultiAgentEnvironment, opponent: Any,
               seat: Union[int, str] = 'alternate'):
    self._versus = versus.VersusEnvironment(env, opponent, seat)
    self._env = env
    size = int(np.prod(env.player_observation_shape())) + env.num_actions
    self._observation_spec = specs.Array((size,), np.float32, 'observation')
    self._action_spec = specs.DiscreteArray(env.num_actions, name='action')
    limits = payoff_range(env)
    self._illegal_reward = -1.0 if limits is None else limits[0]
    self._last: Optional[dm_env.TimeStep] = None  # The game's own timestep.
    self.episode_return = 0.0

  @property
  def environment(self) -> base.MultiAgentEnvironment:
    return self._env

  @property
  def seat(self) -> int:
    return self._versus.seat

  def _flat(self, timestep: dm_env.TimeStep) -> dm_env.TimeStep:
    view = timestep.observation
    flat = np.concatenate([
        np.asarray(view[base.OBSERVATION], np.float32).reshape(-1),
        np.asarray(view[base.LEGAL_ACTIONS], np.float32)])
    self._legal = np.asarray(view[base.LEGAL_ACTIONS])
    if timestep.reward is not None:
      self.episode_return += float(timestep.reward)
    return timestep._replace(observation=flat)

  def reset(self) -> dm_env.TimeStep:
    self.episode_return = 0.0
    return self._flat(self._versus.reset())

  def step(self, action: Any) -> dm_env.TimeStep:
    action = int(action)
    if not (0 <= action < len(self._legal) and self._legal[action]):
      reward = self._illegal_reward - self.episode_return
      self.episode_return = self._illegal_reward
      zeros = np.zeros(self._observation_spec.shape, np.float32)
      return dm_env.truncation(np.float32(reward), zeros)._replace(
          discount=np.float32(0.0))
    return self._flat(self._versus.step(action))

  def observation_spec(self) -> specs.Array:
    return self._observation_spec

  def action_spec(self) -> specs.DiscreteArray:
    return self._action_spec

  def reward_spec(self) -> specs.Array:
    return specs.Array((), np.float32, 'reward')

  def discount_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray((), np.float32, 0.0, 1.0, 'discount')

  def close(self) -> None:
    self._versus.close()


class RandomSeat(SeatEnvironment):
  """The alternating seat against a uniformly random player (evaluation)."""

  def __init__(self, env: base.MultiAgentEnvironment, seed: Optional[int] = None):
    super().__init__(env, versus.RandomOpponent(seed), 'alternate')
