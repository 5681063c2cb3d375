"""Small composable `dm_env.Environment` wrappers.

  env = wrap_all(make('atari:Pong'), [
      lambda e: StepLimit(e, 1000),
      SinglePrecision,
      ObservationActionReward,
  ])
"""

from typing import Any, Callable, NamedTuple, Optional, Sequence

import dm_env
from dm_env import specs
import numpy as np
import tree


class EnvironmentWrapper(dm_env.Environment):
  """Forwards everything to the wrapped environment; override what changes."""

  def __init__(self, environment: dm_env.Environment):
    self._environment = environment

  @property
  def environment(self) -> dm_env.Environment:
    """The wrapped environment."""
    return self._environment

  def reset(self) -> dm_env.TimeStep:
    return self._environment.reset()

  def step(self, action) -> dm_env.TimeStep:
    return self._environment.step(action)

  def observation_spec(self):
    return self._environment.observation_spec()

  def action_spec(self):
    return self._environment.action_spec()

  def reward_spec(self):
    return self._environment.reward_spec()

  def discount_spec(self):
    return self._environment.discount_spec()

  def close(self) -> None:
    self._environment.close()

  def __getattr__(self, name: str) -> Any:
    if name.startswith('__') or name == '_environment':
      raise AttributeError(name)
    return getattr(self._environment, name)


def wrap_all(environment: dm_env.Environment,
             wrappers: Sequence[Callable[[dm_env.Environment],
                                         dm_env.Environment]]
             ) -> dm_env.Environment:
  """Applies `wrappers` in order (the first one is innermost)."""
  for wrapper in wrappers:
    environment = wrapper(environment)
  return environment


def _single_dtype(dtype) -> np.dtype:
  dtype = np.dtype(dtype)
  if dtype == np.float64:
    return np.dtype(np.float32)
  if dtype == np.int64:
    return np.dtype(np.int32)
  if dtype == np.uint64:
    return np.dtype(np.uint32)
  return dtype


def _single_spec(spec):
  dtype = _single_dtype(spec.dtype)
  if dtype == spec.dtype:
    return spec
  if isinstance(spec, specs.DiscreteArray):
    return specs.DiscreteArray(spec.num_values, dtype, name=spec.name)
  if isinstance(spec, specs.BoundedArray):
    return specs.BoundedArray(
        spec.shape, dtype, np.asarray(spec.minimum).astype(dtype),
        np.asarray(spec.maximum).astype(dtype), spec.name)
  return specs.Array(spec.shape, dtype, spec.name)


class SinglePrecision(EnvironmentWrapper):
  """Casts float64 -> float32 and int64 -> int32 in observations, rewards,
  discounts and their specs."""

  def reset(self) -> dm_env.TimeStep:
    return self._convert(self._environment.reset())

  def step(self, action) -> dm_env.TimeStep:
    return self._convert(self._environment.step(action))

  def observation_spec(self):
    return tree.map_structure(_single_spec,
                              self._environment.observation_spec())

  def action_spec(self):
    return tree.map_structure(_single_spec, self._environment.action_spec())

  def reward_spec(self):
    return tree.map_structure(_single_spec, self._environment.reward_spec())

  def discount_spec(self):
    return tree.map_structure(_single_spec, self._environment.discount_spec())

  def _convert(self, timestep: dm_env.TimeStep) -> dm_env.TimeStep:
    def cast(x):
      if x is None:
        return None
      x = np.asarray(x)
      return x.astype(_single_dtype(x.dtype), copy=False)
    return timestep._replace(
        reward=None if timestep.reward is None else tree.map_structure(
            cast, timestep.reward),
        discount=None if timestep.discount is None else tree.map_structure(
            cast, timestep.discount),
        observation=tree.map_structure(cast, timestep.observation))


class StepLimit(EnvironmentWrapper):
  """Ends an episode after `step_limit` steps as a truncation (discount kept,
  so that learners still bootstrap)."""

  def __init__(self, environment: dm_env.Environment, step_limit: int):
    super().__init__(environment)
    if step_limit < 1:
      raise ValueError(f'step_limit must be >= 1, got {step_limit}.')
    self._step_limit = step_limit
    self._elapsed = 0
    self._reset_next_step = True

  def reset(self) -> dm_env.TimeStep:
    self._elapsed = 0
    self._reset_next_step = False
    return self._environment.reset()

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next_step:
      return self.reset()
    timestep = self._environment.step(action)
    self._elapsed += 1
    if not timestep.last() and self._elapsed >= self._step_limit:
      timestep = timestep._replace(step_type=dm_env.StepType.LAST)
    self._reset_next_step = timestep.last()
    return timestep


class EpisodeStats(NamedTuple):
  """The undiscounted return and the number of steps of one episode."""
  episode_return: float
  episode_length: int


class EpisodeStatistics(EnvironmentWrapper):
  """Tracks the return and length of the current and the finished episodes.

  `current` is the running episode; `last_episode` the most recently
  finished one (None before the first ends); `num_episodes` how many ended.
  """

  def __init__(self, environment: dm_env.Environment):
    super().__init__(environment)
    self._return = 0.
    self._length = 0
    self.last_episode: Optional[EpisodeStats] = None
    self.num_episodes = 0

  @property
  def current(self) -> EpisodeStats:
    return EpisodeStats(self._return, self._length)

  def reset(self) -> dm_env.TimeStep:
    return self._record(self._environment.reset())

  def step(self, action) -> dm_env.TimeStep:
    return self._record(self._environment.step(action))

  def _record(self, timestep: dm_env.TimeStep) -> dm_env.TimeStep:
    if timestep.first():
      self._return, self._length = 0., 0
    else:
      self._return += float(np.sum(timestep.reward))
      self._length += 1
      if timestep.last():
        self.last_episode = self.current
        self.num_episodes += 1
    return timestep


class OAR(NamedTuple):
  """Observation with the previous action and reward (what R2D2's recurrent
  network reads; Kapturowski et al., 2019)."""
  observation: Any
  action: Any
  reward: Any


class ObservationActionReward(EnvironmentWrapper):
  """Observations become `OAR(observation, previous action, previous
  reward)`; on a FIRST step the action and reward are zeros."""

  def __init__(self, environment: dm_env.Environment):
    super().__init__(environment)
    self._zero_action = tree.map_structure(
        lambda s: s.generate_value(), environment.action_spec())
    self._zero_reward = tree.map_structure(
        lambda s: np.zeros(s.shape, s.dtype), environment.reward_spec())

  def reset(self) -> dm_env.TimeStep:
    timestep = self._environment.reset()
    return timestep._replace(observation=OAR(
        timestep.observation, self._zero_action, self._zero_reward))

  def step(self, action) -> dm_env.TimeStep:
    timestep = self._environment.step(action)
    if timestep.first():
      return timestep._replace(observation=OAR(
          timestep.observation, self._zero_action, self._zero_reward))
    action = tree.map_structure(lambda s, a: np.asarray(a, s.dtype),
                                self._environment.action_spec(), action)
    reward = tree.map_structure(lambda s, r: np.asarray(r, s.dtype),
                                self._environment.reward_spec(),
                                timestep.reward)
    return timestep._replace(observation=OAR(timestep.observation, action,
                                             reward))

  def observation_spec(self) -> OAR:
    return OAR(self._environment.observation_spec(),
               self._environment.action_spec(),
               self._environment.reward_spec())


class ActionRepeat(EnvironmentWrapper):
  """Repeats each action `num_repeats` times; rewards add up, discounts
  multiply; stops early at the end of an episode."""

  def __init__(self, environment: dm_env.Environment, num_repeats: int):
    super().__init__(environment)
    if num_repeats < 1:
      raise ValueError(f'num_repeats must be >= 1, got {num_repeats}.')
    self._num_repeats = num_repeats

  def step(self, action) -> dm_env.TimeStep:
    timestep = self._environment.step(action)
    if timestep.first():
      return timestep
    reward, discount = timestep.reward, timestep.discount
    for _ in range(self._num_repeats - 1):
      if timestep.last():
        break
      timestep = self._environment.step(action)
      reward = reward + timestep.reward
      discount = discount * timestep.discount
    return timestep._replace(reward=reward, discount=discount)
