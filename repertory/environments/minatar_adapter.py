"""MinAtar games (Young & Tian, 2019) as `dm_env.Environment`s."""

from typing import Optional

import dm_env
from dm_env import specs
import numpy as np

GAMES = ('asterix', 'breakout', 'freeway', 'seaquest', 'space_invaders')


class MinAtarEnvironment(dm_env.Environment):
  """One MinAtar game; observation is the [10, 10, channels] bool board.

  Actions index the game's minimal action set (`minimal_action_set=True`,
  the default) or all 6 MinAtar actions.
  """

  def __init__(self, game: str, seed: Optional[int] = None,
               sticky_action_prob: float = 0.1,
               difficulty_ramping: bool = True,
               minimal_action_set: bool = True,
               max_episode_steps: Optional[int] = None):
    if game not in GAMES:
      raise ValueError(
          f'Unknown MinAtar game {game!r}; known games: {", ".join(GAMES)}.')
    import minatar  # pylint: disable=g-import-not-at-top
    self._env = minatar.Environment(
        game, sticky_action_prob=sticky_action_prob,
        difficulty_ramping=difficulty_ramping)
    # Seeds both the sticky-action RNG and the game's RNG; without a seed
    # the game draws from fresh OS entropy.
    self._env.seed(seed if seed is not None
                   else np.random.SeedSequence().entropy % 2**32)
    if minimal_action_set:
      self._actions = [int(a) for a in self._env.minimal_action_set()]
    else:
      self._actions = list(range(self._env.num_actions()))
    self._max_episode_steps = max_episode_steps
    self._episode_steps = 0
    self._reset_next_step = True

  def reset(self) -> dm_env.TimeStep:
    self._env.reset()
    self._episode_steps = 0
    self._reset_next_step = False
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next_step:
      return self.reset()
    reward, terminal = self._env.act(self._actions[int(action)])
    self._episode_steps += 1
    observation = self._observation()
    if terminal:
      self._reset_next_step = True
      return dm_env.termination(float(reward), observation)
    if (self._max_episode_steps is not None and
        self._episode_steps >= self._max_episode_steps):
      self._reset_next_step = True
      return dm_env.truncation(float(reward), observation)
    return dm_env.transition(float(reward), observation)

  def observation_spec(self) -> specs.Array:
    return specs.Array(self._env.state_shape(), dtype=bool, name='board')

  def action_spec(self) -> specs.DiscreteArray:
    return specs.DiscreteArray(len(self._actions), dtype=np.int32,
                               name='action')

  def _observation(self) -> np.ndarray:
    return np.asarray(self._env.state(), dtype=bool)
