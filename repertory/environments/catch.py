"""Catch: a tiny, dependency-free numpy version of bsuite's Catch.

Rules as in bsuite (Osband et al., 2020, "Behaviour Suite for Reinforcement
Learning"): a ball starts in a random column of the top row and falls one row
per step; the agent moves a paddle on the bottom row left, not at all or right
(actions 0, 1, 2). When the ball reaches the bottom row the episode ends with
reward +1 if the paddle is under the ball and -1 otherwise; every other
reward is 0. An episode lasts `rows - 1` steps.
"""

from typing import Optional

import dm_env
from dm_env import specs
import numpy as np

_MOVES = (-1, 0, 1)


class Catch(dm_env.Environment):
  """bsuite's Catch as a `dm_env.Environment`; observation is the board."""

  def __init__(self, rows: int = 10, columns: int = 5,
               seed: Optional[int] = None):
    if rows < 2 or columns < 1:
      raise ValueError(
          f'Catch needs rows >= 2 and columns >= 1, got rows={rows}, '
          f'columns={columns}.')
    self._rows = rows
    self._columns = columns
    self._rng = np.random.RandomState(seed)
    self._board = np.zeros((rows, columns), dtype=np.float32)
    self._ball_x = 0
    self._ball_y = 0
    self._paddle_x = columns // 2
    self._reset_next_step = True

  def reset(self) -> dm_env.TimeStep:
    self._reset_next_step = False
    self._ball_x = self._rng.randint(self._columns)
    self._ball_y = 0
    self._paddle_x = self._columns // 2
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next_step:
      return self.reset()
    action = int(action)
    if not 0 <= action < 3:
      raise ValueError(f'Catch action must be 0, 1 or 2, got {action}.')
    self._paddle_x = min(max(self._paddle_x + _MOVES[action], 0),
                         self._columns - 1)
    self._ball_y += 1
    if self._ball_y == self._rows - 1:
      self._reset_next_step = True
      reward = 1. if self._paddle_x == self._ball_x else -1.
      return dm_env.termination(reward=reward, observation=self._observation())
    return dm_env.transition(reward=0., observation=self._observation())

  def observation_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray(
        shape=(self._rows, self._columns), dtype=np.float32, minimum=0.,
        maximum=1., name='board')

  def action_spec(self) -> specs.DiscreteArray:
    return specs.DiscreteArray(3, dtype=np.int32, name='action')

  def _observation(self) -> np.ndarray:
    board = self._board
    board.fill(0.)
    board[self._ball_y, self._ball_x] = 1.
    board[self._rows - 1, self._paddle_x] = 1.
    return board.copy()
