"""Batched environments: N environments stepped together, reset automatically.

Every implementation follows the same contract, so actors, adders and the
SEED inference server can keep per-environment episodes straight:

* `reset()` resets every environment and returns a `BatchedTimeStep` whose
  `step_type` is FIRST everywhere.
* `step(actions)` takes one action per environment (leading dimension N).
  An environment whose previous step was LAST ignores its action and returns
  the FIRST step of its next episode (reward 0, discount 1, as `dm_env`);
  the others step as usual. So `timestep.first()[i]` says that environment
  i started a new episode at this step.
* Rewards and discounts are float32 arrays of shape [N]; step types are int8
  arrays of shape [N] holding `dm_env.StepType` values; observations are the
  single environment's observation nest with a leading dimension N.
* Environment i of a batch built with seed s is seeded with s + i, in every
  implementation.
"""

import abc
from typing import Any, Callable, List, NamedTuple, Sequence

import dm_env
import numpy as np
import tree

FIRST = int(dm_env.StepType.FIRST)
MID = int(dm_env.StepType.MID)
LAST = int(dm_env.StepType.LAST)


class BatchedTimeStep(NamedTuple):
  """A `dm_env.TimeStep` whose fields carry a leading batch dimension N.

  Attributes:
    step_type: int8 [N], values of `dm_env.StepType`.
    reward: float32 [N]; 0 on FIRST steps.
    discount: float32 [N]; 1 on FIRST steps, 0 on terminations, 1 on
      truncations (LAST steps that must still bootstrap).
    observation: the observation nest, each array [N, ...].
  """
  step_type: np.ndarray
  reward: np.ndarray
  discount: np.ndarray
  observation: Any

  def first(self) -> np.ndarray:
    """bool [N]: which environments started a new episode at this step."""
    return self.step_type == FIRST

  def mid(self) -> np.ndarray:
    return self.step_type == MID

  def last(self) -> np.ndarray:
    """bool [N]: which environments ended their episode at this step."""
    return self.step_type == LAST

  def unbatch(self, index: int) -> dm_env.TimeStep:
    """Returns environment `index`'s timestep as a plain `dm_env.TimeStep`
    (a FIRST step gets reward and discount None, as `dm_env.restart`)."""
    step_type = dm_env.StepType(int(self.step_type[index]))
    first = step_type == dm_env.StepType.FIRST
    return dm_env.TimeStep(
        step_type=step_type,
        reward=None if first else self.reward[index],
        discount=None if first else self.discount[index],
        observation=tree.map_structure(lambda x: x[index], self.observation))


class BatchedEnvironment(abc.ABC):
  """N environments of one kind, stepped with one call; see module doc."""

  @property
  @abc.abstractmethod
  def num_envs(self) -> int:
    """The number of environments N."""

  @abc.abstractmethod
  def observation_spec(self) -> Any:
    """The spec of ONE environment's observation (no batch dimension)."""

  @abc.abstractmethod
  def action_spec(self) -> Any:
    """The spec of ONE environment's action (no batch dimension)."""

  def reward_spec(self) -> Any:
    return dm_env.specs.Array((), np.float32, name='reward')

  def discount_spec(self) -> Any:
    return dm_env.specs.BoundedArray(
        (), np.float32, minimum=0., maximum=1., name='discount')

  @abc.abstractmethod
  def reset(self) -> BatchedTimeStep:
    """Resets every environment; all step types are FIRST."""

  @abc.abstractmethod
  def step(self, actions: Any) -> BatchedTimeStep:
    """Steps every environment with its action ([N, ...] leading dim)."""

  def close(self) -> None:
    """Releases the environments (processes, threads); idempotent."""

  def __enter__(self):
    return self

  def __exit__(self, *unused_exc):
    self.close()


def timestep_fields(timestep: dm_env.TimeStep):
  """(step_type, reward, discount) of one timestep, FIRST as 0 / 1."""
  if timestep.step_type == dm_env.StepType.FIRST:
    return FIRST, 0., 1.
  return int(timestep.step_type), timestep.reward, timestep.discount


def stack_observations(observations: Sequence[Any]) -> Any:
  """Stacks a list of observation nests into one nest of [N, ...] arrays."""
  first = observations[0]
  if isinstance(first, np.ndarray):
    return np.stack(observations)
  return tree.map_structure(lambda *xs: np.stack(xs), *observations)


def check_actions(actions: Any, num_envs: int) -> None:
  """Raises if the actions' leading dimension is not `num_envs`."""
  for leaf in tree.flatten(actions):
    if np.shape(leaf)[:1] != (num_envs,):
      raise ValueError(
          f'Batched step expects actions with leading dimension '
          f'num_envs={num_envs}, got shape {np.shape(leaf)}.')


class SerialBatchedEnvironment(BatchedEnvironment):
  """N `dm_env.Environment`s stepped one after the other in this process."""

  def __init__(self, env_factories: Sequence[Callable[[], dm_env.Environment]]):
    """Builds one environment per factory (factory i gets no arguments)."""
    if not env_factories:
      raise ValueError('SerialBatchedEnvironment needs at least 1 factory.')
    self._envs: List[dm_env.Environment] = [f() for f in env_factories]
    self._num_envs = len(self._envs)
    self._needs_reset = np.ones(self._num_envs, dtype=bool)
    self._closed = False

  @property
  def num_envs(self) -> int:
    return self._num_envs

  @property
  def envs(self) -> List[dm_env.Environment]:
    """The underlying environments (read only, for inspection)."""
    return list(self._envs)

  def observation_spec(self):
    return self._envs[0].observation_spec()

  def action_spec(self):
    return self._envs[0].action_spec()

  def reset(self) -> BatchedTimeStep:
    return self._batch([env.reset() for env in self._envs])

  def step(self, actions) -> BatchedTimeStep:
    check_actions(actions, self._num_envs)
    flat = isinstance(actions, np.ndarray)
    timesteps = []
    for i, env in enumerate(self._envs):
      if self._needs_reset[i]:
        timesteps.append(env.reset())
      else:
        action = actions[i] if flat else tree.map_structure(
            lambda a, i=i: a[i], actions)
        timesteps.append(env.step(action))
    return self._batch(timesteps)

  def close(self) -> None:
    if not self._closed:
      self._closed = True
      for env in self._envs:
        env.close()

  def _batch(self, timesteps: Sequence[dm_env.TimeStep]) -> BatchedTimeStep:
    n = self._num_envs
    step_type = np.empty(n, np.int8)
    reward = np.empty(n, np.float32)
    discount = np.empty(n, np.float32)
    for i, ts in enumerate(timesteps):
      step_type[i], reward[i], discount[i] = timestep_fields(ts)
    self._needs_reset = step_type == LAST
    return BatchedTimeStep(step_type, reward, discount,
                           stack_observations([ts.observation
                                               for ts in timesteps]))


class BatchedEpisodeStatistics(BatchedEnvironment):
  """Wraps a batch; tracks each environment's episode return and length.

  `pop_finished()` returns the episodes that ended since the last call as a
  list of (environment index, return, length), for logging:

    batch = BatchedEpisodeStatistics(make_batched('catch', 8))
    ...
    for index, episode_return, length in batch.pop_finished(): ...
  """

  def __init__(self, environment: BatchedEnvironment):
    self._environment = environment
    n = environment.num_envs
    self._returns = np.zeros(n, np.float64)
    self._lengths = np.zeros(n, np.int64)
    self._finished: List[tuple] = []

  @property
  def environment(self) -> BatchedEnvironment:
    return self._environment

  @property
  def num_envs(self) -> int:
    return self._environment.num_envs

  def observation_spec(self):
    return self._environment.observation_spec()

  def action_spec(self):
    return self._environment.action_spec()

  def reset(self) -> BatchedTimeStep:
    self._returns[:] = 0.
    self._lengths[:] = 0
    return self._environment.reset()

  def step(self, actions) -> BatchedTimeStep:
    timestep = self._environment.step(actions)
    first = timestep.first()
    self._returns[first] = 0.
    self._lengths[first] = 0
    self._returns[~first] += timestep.reward[~first]
    self._lengths[~first] += 1
    for i in np.flatnonzero(timestep.last()):
      self._finished.append(
          (int(i), float(self._returns[i]), int(self._lengths[i])))
    return timestep

  def pop_finished(self) -> List[tuple]:
    finished, self._finished = self._finished, []
    return finished

  def close(self) -> None:
    self._environment.close()
