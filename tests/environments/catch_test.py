"""Tests for the built-in Catch's rules (bsuite's)."""

import dm_env
import numpy as np
import pytest

from repertory import environments


def _play(env, policy):
  timestep = env.reset()
  steps = 0
  while not timestep.last():
    board = timestep.observation
    ball_x = int(np.argmax(board[:-1].max(axis=0)))
    paddle_x = int(np.argmax(board[-1]))
    timestep = env.step(policy(ball_x, paddle_x))
    steps += 1
  return timestep, steps


@pytest.mark.parametrize('rows, columns', [(10, 5), (5, 5), (4, 3)])
def test_tracking_the_ball_wins(rows, columns):
  env = environments.Catch(rows, columns, seed=0)
  for _ in range(10):
    last, steps = _play(env, lambda ball, paddle: 1 + np.sign(ball - paddle))
    assert steps == rows - 1
    assert last.reward == 1. and last.discount == 0.


def test_running_away_loses():
  env = environments.Catch(seed=0)
  for _ in range(10):
    last, _ = _play(env, lambda ball, paddle: 0 if ball >= 2 else 2)
    assert last.reward == -1.


def test_board_and_rewards():
  env = environments.Catch(seed=1)
  first = env.reset()
  assert first.observation.sum() == 2. and first.observation[-1, 2] == 1.
  mid = env.step(0)
  assert mid.step_type == dm_env.StepType.MID and mid.reward == 0.
  assert mid.observation[-1, 1] == 1.
  with pytest.raises(ValueError, match='0, 1 or 2'):
    env.step(3)
  with pytest.raises(ValueError, match='rows'):
    environments.Catch(rows=1)
