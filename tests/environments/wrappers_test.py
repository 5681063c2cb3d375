"""Tests for the environment wrappers."""

import dm_env
import numpy as np
import pytest

from repertory import environments


def test_single_precision():
  env = environments.SinglePrecision(
      environments.make('bsuite:deep_sea/5', seed=0))
  assert env.reward_spec().dtype == np.float32
  timestep = env.reset()
  assert timestep.observation.dtype == np.float32
  timestep = env.step(1)
  assert np.asarray(timestep.reward).dtype == np.float32
  assert np.asarray(timestep.discount).dtype == np.float32
  gym_env = environments.SinglePrecision(environments.make('gym:Pendulum-v1'))
  assert gym_env.observation_spec().dtype == np.float32
  assert gym_env.reset().observation.dtype == np.float32


def test_step_limit_truncates_with_discount_one():
  env = environments.StepLimit(environments.make('catch', seed=0), 3)
  env.reset()
  timesteps = [env.step(1) for _ in range(4)]
  assert [ts.step_type for ts in timesteps] == [
      dm_env.StepType.MID, dm_env.StepType.MID, dm_env.StepType.LAST,
      dm_env.StepType.FIRST]
  assert timesteps[2].discount == 1.0
  with pytest.raises(ValueError, match='step_limit'):
    environments.StepLimit(environments.make('catch'), 0)


def test_step_limit_keeps_earlier_termination():
  env = environments.StepLimit(environments.make('catch:4x3', seed=0), 100)
  env.reset()
  timesteps = [env.step(1) for _ in range(3)]
  assert timesteps[-1].last() and timesteps[-1].discount == 0.0


def test_episode_statistics():
  env = environments.EpisodeStatistics(environments.make('catch', seed=0))
  assert env.last_episode is None
  env.reset()
  for _ in range(9):
    timestep = env.step(1)
  assert timestep.last()
  assert env.last_episode.episode_length == 9
  assert env.last_episode.episode_return == timestep.reward
  assert env.num_episodes == 1
  env.step(1)  # FIRST of the next episode.
  assert env.current == environments.wrappers.EpisodeStats(0., 0)


def test_observation_action_reward():
  env = environments.ObservationActionReward(
      environments.make('catch:3x3', seed=0))
  assert isinstance(env.observation_spec(), environments.OAR)
  first = env.reset()
  assert first.observation.action == 0 and first.observation.reward == 0.
  mid = env.step(2)
  assert mid.observation.action == 2
  last = env.step(0)
  assert last.last() and last.observation.action == 0
  assert last.observation.reward == last.reward
  assert env.step(1).observation.action == 0  # FIRST again: zeros.


def test_action_repeat_sums_rewards_and_stops_at_the_end():
  env = environments.ActionRepeat(environments.make('catch', seed=0), 4)
  env.reset()
  timesteps = [env.step(1) for _ in range(3)]
  # 9 steps per episode: 4 + 4 + 1 (stopped early at LAST).
  assert [ts.step_type for ts in timesteps] == [
      dm_env.StepType.MID, dm_env.StepType.MID, dm_env.StepType.LAST]
  assert timesteps[-1].reward in (-1., 1.)
  assert env.step(1).first()


def test_wrappers_compose_and_forward_attributes():
  env = environments.wrap_all(environments.make('gym:CartPole-v1', seed=0), [
      lambda e: environments.StepLimit(e, 5),
      environments.SinglePrecision,
      environments.EpisodeStatistics,
      environments.ObservationActionReward,
  ])
  env.reset()
  for _ in range(5):
    timestep = env.step(np.int64(0))
  assert timestep.last()
  assert env.environment.last_episode.episode_length == 5
  assert env.gym_env.spec.id == 'CartPole-v1'  # Forwarded to the adapter.
