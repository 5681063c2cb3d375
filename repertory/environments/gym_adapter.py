"""Adapts a gymnasium environment to `dm_env.Environment`.

Termination and truncation stay distinct, so that bootstrapping is correct:
`terminated` becomes a LAST step with discount 0 (`dm_env.termination`), a
`truncated`-only step becomes a LAST step that keeps discount 1
(`dm_env.truncation`): the learner must still bootstrap from its value.
"""

from typing import Any, Callable, Optional, Union

import dm_env
from dm_env import specs
import numpy as np
import tree

# gymnasium is imported lazily: it is an optional extra.


def space_to_spec(space: Any, name: str = 'observation') -> Any:
  """Returns the dm_env spec (or nest of specs) of a gymnasium space."""
  from gymnasium import spaces  # pylint: disable=g-import-not-at-top
  if isinstance(space, spaces.Discrete):
    return specs.DiscreteArray(
        int(space.n), dtype=np.int64 if space.dtype is None else space.dtype,
        name=name)
  if isinstance(space, spaces.Box):
    return specs.BoundedArray(
        shape=space.shape, dtype=space.dtype, minimum=space.low,
        maximum=space.high, name=name)
  if isinstance(space, spaces.MultiBinary):
    return specs.BoundedArray(
        shape=space.shape, dtype=space.dtype, minimum=0, maximum=1, name=name)
  if isinstance(space, spaces.MultiDiscrete):
    return specs.BoundedArray(
        shape=space.shape, dtype=space.dtype, minimum=space.start,
        maximum=space.start + space.nvec - 1, name=name)
  if isinstance(space, spaces.Dict):
    return {key: space_to_spec(sub, f'{name}/{key}')
            for key, sub in space.spaces.items()}
  if isinstance(space, spaces.Tuple):
    return tuple(space_to_spec(sub, f'{name}/{i}')
                 for i, sub in enumerate(space.spaces))
  raise TypeError(
      f'Cannot map gymnasium space {space!r} ({name}) to a dm_env spec; '
      'supported: Discrete, Box, MultiBinary, MultiDiscrete, Dict, Tuple.')


class GymAdapter(dm_env.Environment):
  """A `dm_env.Environment` view of one `gymnasium.Env`.

  Discrete actions are numbered from 0 (a `Discrete(n, start=k)` space gets
  `k` added back before stepping). The `info` dict of the latest step is kept
  in `last_info`.
  """

  def __init__(self, env: Any, seed: Optional[int] = None):
    self._env = env
    self._seed = seed
    self._seeded = False
    self._reset_next_step = True
    self._observation_spec = space_to_spec(env.observation_space)
    self._action_spec = space_to_spec(env.action_space, 'action')
    from gymnasium import spaces  # pylint: disable=g-import-not-at-top
    space = env.action_space
    self._action_offset = (
        int(space.start) if isinstance(space, spaces.Discrete) else 0)
    self.last_info = {}

  @property
  def gym_env(self) -> Any:
    """The wrapped gymnasium environment."""
    return self._env

  def reset(self) -> dm_env.TimeStep:
    if not self._seeded:
      self._seeded = True
      observation, info = self._env.reset(seed=self._seed)
      if self._seed is not None:
        self._env.action_space.seed(self._seed)
    else:
      observation, info = self._env.reset()
    self.last_info = info
    self._reset_next_step = False
    return dm_env.restart(self._observation(observation))

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next_step:
      return self.reset()
    if self._action_offset:
      action = action + self._action_offset
    if isinstance(self._action_spec, specs.DiscreteArray):
      action = int(action)
    observation, reward, terminated, truncated, info = self._env.step(action)
    self.last_info = info
    observation = self._observation(observation)
    reward = float(reward)
    if terminated:
      self._reset_next_step = True
      return dm_env.termination(reward, observation)
    if truncated:
      self._reset_next_step = True
      return dm_env.truncation(reward, observation)
    return dm_env.transition(reward, observation)

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def close(self) -> None:
    self._env.close()

  def _observation(self, observation):
    spec = self._observation_spec
    if isinstance(spec, specs.Array):  # The common case, without dm-tree.
      return np.asarray(observation, dtype=spec.dtype)
    return tree.map_structure(
        lambda spec, x: np.asarray(x, dtype=spec.dtype),
        self._observation_spec, observation)


def from_gym(env: Union[Any, Callable[[], Any]],
             seed: Optional[int] = None) -> GymAdapter:
  """Wraps a `gymnasium.Env` (or a no-argument factory of one) as dm_env.

  Args:
    env: a gymnasium environment, or a callable returning one.
    seed: passed to the first `reset(seed=...)` and to the action space.
  """
  import gymnasium  # pylint: disable=g-import-not-at-top
  if not isinstance(env, gymnasium.Env) and callable(env):
    env = env()
  if not isinstance(env, gymnasium.Env):
    raise TypeError(
        f'from_gym expects a gymnasium.Env or a factory of one, got {env!r}.')
  return GymAdapter(env, seed=seed)
