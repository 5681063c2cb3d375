"""Tests for the gymnasium adapter: discounts, spaces, seeding."""

import dm_env
from dm_env import specs
import gymnasium
from gymnasium import spaces
import numpy as np
import pytest

from repertory import environments


def test_truncation_keeps_discount_one():
  env = environments.make('gym:CartPole-v1', seed=0, max_episode_steps=5)
  env.reset()
  timesteps = [env.step(t % 2) for t in range(5)]
  assert [ts.step_type for ts in timesteps] == [dm_env.StepType.MID] * 4 + [
      dm_env.StepType.LAST]
  assert timesteps[-1].discount == 1.0
  assert env.step(0).first()


def test_termination_has_discount_zero():
  env = environments.make('gym:CartPole-v1', seed=0)
  env.reset()
  for _ in range(100):
    timestep = env.step(1)  # Always push right: the pole falls.
    if timestep.last():
      break
  assert timestep.last()
  assert timestep.discount == 0.0
  assert timestep.reward == 1.0


def test_envpool_truncation_and_termination():
  env = environments.make('envpool:CartPole-v1', seed=0, max_episode_steps=5)
  env.reset()
  last = [env.step(t % 2) for t in range(5)][-1]
  assert last.last() and last.discount == 1.0
  assert env.step(0).first()
  env = environments.make('envpool:CartPole-v1', seed=0)
  env.reset()
  for _ in range(100):
    timestep = env.step(1)
    if timestep.last():
      break
  assert timestep.last() and timestep.discount == 0.0


def test_space_to_spec():
  assert environments.space_to_spec(spaces.Discrete(4)) == specs.DiscreteArray(
      4, dtype=np.int64, name='observation')
  box = environments.space_to_spec(spaces.Box(-1., 2., (3,), np.float32))
  assert box.shape == (3,) and box.dtype == np.float32
  np.testing.assert_array_equal(box.maximum, [2., 2., 2.])
  multi = environments.space_to_spec(spaces.MultiDiscrete([3, 5]))
  np.testing.assert_array_equal(multi.maximum, [2, 4])
  nested = environments.space_to_spec(spaces.Dict(
      a=spaces.MultiBinary(2), b=spaces.Tuple((spaces.Discrete(2),))))
  assert set(nested) == {'a', 'b'} and isinstance(nested['b'], tuple)
  with pytest.raises(TypeError, match='Text'):
    environments.space_to_spec(spaces.Text(5))


class _OffsetEnv(gymnasium.Env):
  """Discrete(3, start=-1) actions; the observation echoes the action."""
  observation_space = spaces.Box(-5, 5, (), np.float64)
  action_space = spaces.Discrete(3, start=-1)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    return np.float64(0.), {}

  def step(self, action):
    return np.float64(action), 0.5, False, False, {'echo': action}


def test_from_gym_offsets_discrete_actions_and_casts():
  env = environments.from_gym(_OffsetEnv())
  assert env.action_spec().num_values == 3
  env.reset()
  timestep = env.step(0)
  assert timestep.observation == -1. and env.last_info['echo'] == -1
  assert timestep.observation.dtype == np.float64
  single = environments.SinglePrecision(env)
  assert single.step(2).observation.dtype == np.float32
  with pytest.raises(TypeError, match='gymnasium.Env'):
    environments.from_gym(42)
