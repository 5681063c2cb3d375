"""EnvPool (Weng et al., 2022) tasks: one environment, or a native batch.

EnvPool steps its environments in a C++ thread pool and resets finished ones
itself: the call after an environment's last step returns the first step of
its next episode. That matches `BatchedEnvironment`'s contract, so
`EnvPoolBatchedEnvironment` drives the pool directly. EnvPool 1.2.5's own
dm_env interface fails on numpy<2 (`np.isclose` on a Python int), so this
module uses its gymnasium interface and builds dm_env specs from its spaces.

Atari (`atari:<Game>`) uses EnvPool's Atari preprocessing (Machado et al.,
2018; Mnih et al., 2015): frame skip 4 with max-pooling, grey-scale 84x84,
a stack of 4 frames, up to 30 no-op starts, episodic life (a lost life ends
the training episode with discount 0; the game continues from where it was),
episodes capped at 27,000 agent steps (108,000 frames), sticky actions
optional (`sticky_actions=True` repeats the previous action with
probability 0.25). Observations are uint8 [84, 84, 4] (channels last, what
TensorFlow's CPU convolutions need) unless `channels_last=False`.
"""

from typing import Any, Dict, Optional
import warnings

import dm_env
import numpy as np

from repertory.environments import batched
from repertory.environments import gym_adapter

ATARI_DEFAULTS = dict(
    frame_skip=4, stack_num=4, img_height=84, img_width=84, gray_scale=True,
    noop_max=30, episodic_life=True, reward_clip=False,
    repeat_action_probability=0., max_episode_steps=27_000)
STICKY_ACTION_PROBABILITY = 0.25


def _random_seed() -> int:
  return int(np.random.SeedSequence().entropy % 2**31)


def all_tasks():
  import envpool  # pylint: disable=g-import-not-at-top
  return envpool.list_all_envs()


def atari_task(game: str) -> str:
  """'Pong' -> 'Pong-v5'; raises naming the known games if unknown."""
  from envpool.registration import registry  # pylint: disable=g-import-not-at-top
  atari = sorted(task for task, entry in registry.specs.items()
                 if entry[0] == 'envpool.atari' and task.endswith('-v5'))
  task = game if game.endswith('-v5') else f'{game}-v5'
  if task not in atari:
    raise ValueError(f'no Atari game {game!r} in EnvPool; known games: '
                     f'{", ".join(t[:-3] for t in atari)}')
  return task


def atari_kwargs(sticky_actions: bool = False, **kwargs) -> Dict[str, Any]:
  """EnvPool Atari options: the defaults above, overridden by `kwargs`."""
  options = dict(ATARI_DEFAULTS)
  if sticky_actions:
    options['repeat_action_probability'] = STICKY_ACTION_PROBABILITY
  options.update(kwargs)
  return options


def _simplify_bounds(spec):
  """Uniform bounds of a BoundedArray become scalars (readable specs)."""
  if not isinstance(spec, dm_env.specs.BoundedArray) or isinstance(
      spec, dm_env.specs.DiscreteArray):
    return spec
  minimum, maximum = np.asarray(spec.minimum), np.asarray(spec.maximum)
  if minimum.size > 1 and (minimum == minimum.flat[0]).all() and (
      maximum == maximum.flat[0]).all():
    return dm_env.specs.BoundedArray(spec.shape, spec.dtype, minimum.flat[0],
                                     maximum.flat[0], spec.name)
  return spec


def _channels_last(bound):
  bound = np.asarray(bound)
  return bound if bound.ndim < 3 else np.moveaxis(bound, 0, -1)


class EnvPoolBatchedEnvironment(batched.BatchedEnvironment):
  """N environments of one EnvPool task, stepped by EnvPool's thread pool."""

  def __init__(self, task: str, num_envs: int, seed: Optional[int] = None,
               num_threads: int = 1, channels_last: bool = False, **kwargs):
    """Creates the pool.

    Args:
      task: an EnvPool task id, e.g. 'CartPole-v1' or 'Pong-v5'.
      num_envs: N.
      seed: environment i gets seed + i (EnvPool's own rule); None draws one.
      num_threads: EnvPool worker threads (1 is fastest on 2 cores).
      channels_last: move a [C, H, W] image observation's channels last.
      **kwargs: EnvPool options for the task (e.g. `episodic_life`).
    """
    tasks = all_tasks()
    if task not in tasks:
      raise ValueError(f'Unknown EnvPool task {task!r}; see '
                       f'envpool.list_all_envs() ({len(tasks)} tasks), '
                       f'e.g. {", ".join(tasks[:5])}.')
    if num_envs < 1 or num_threads < 1:
      raise ValueError(f'num_envs and num_threads must be >= 1, got '
                       f'{num_envs} and {num_threads}.')
    import envpool  # pylint: disable=g-import-not-at-top
    self._task = task
    self._num_envs = num_envs
    with warnings.catch_warnings():
      # EnvPool builds float32 Boxes from float64 bounds and gymnasium warns.
      warnings.filterwarnings('ignore', message='.*precision lowered.*')
      self._pool = envpool.make_gymnasium(
          task, num_envs=num_envs, batch_size=num_envs,
          num_threads=num_threads,
          seed=_random_seed() if seed is None else int(seed), **kwargs)
      observation_space = self._pool.observation_space
      action_space = self._pool.action_space
    observation_spec = _simplify_bounds(
        gym_adapter.space_to_spec(observation_space))
    self._transpose = (channels_last and
                       isinstance(observation_spec, dm_env.specs.Array) and
                       len(observation_spec.shape) == 3)
    if self._transpose:
      observation_spec = dm_env.specs.BoundedArray(
          shape=observation_spec.shape[1:] + observation_spec.shape[:1],
          dtype=observation_spec.dtype,
          minimum=_channels_last(observation_spec.minimum),
          maximum=_channels_last(observation_spec.maximum),
          name=observation_spec.name)
    self._observation_spec = observation_spec
    self._action_spec = gym_adapter.space_to_spec(action_space, 'action')
    self._action_dtype = action_space.dtype
    self._last = np.zeros(num_envs, dtype=bool)
    self._started = False
    self._closed = False
    self.last_info = {}

  @property
  def num_envs(self) -> int:
    return self._num_envs

  @property
  def task(self) -> str:
    return self._task

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def reset(self) -> batched.BatchedTimeStep:
    observation, self.last_info = self._pool.reset()
    self._started = True
    self._last[:] = False
    n = self._num_envs
    return batched.BatchedTimeStep(
        np.full(n, batched.FIRST, np.int8), np.zeros(n, np.float32),
        np.ones(n, np.float32), self._observation(observation))

  def step(self, actions) -> batched.BatchedTimeStep:
    if not self._started:
      return self.reset()
    batched.check_actions(actions, self._num_envs)
    actions = np.asarray(actions, dtype=self._action_dtype)
    observation, reward, terminated, truncated, info = self._pool.step(actions)
    self.last_info = info
    first = self._last
    last = np.logical_or(terminated, truncated)
    step_type = np.where(first, batched.FIRST,
                         np.where(last, batched.LAST,
                                  batched.MID)).astype(np.int8)
    reward = np.where(first, 0., reward).astype(np.float32)
    discount = np.where(np.logical_and(terminated, ~first), 0.,
                        1.).astype(np.float32)
    self._last = np.logical_and(last, ~first)
    return batched.BatchedTimeStep(step_type, reward, discount,
                                   self._observation(observation))

  def close(self) -> None:
    if not self._closed:
      self._closed = True
      close = getattr(self._pool, 'close', None)
      if close is not None:
        close()

  def _observation(self, observation):
    if self._transpose:
      return np.ascontiguousarray(np.moveaxis(observation, 1, -1))
    return observation


class EnvPoolEnvironment(dm_env.Environment):
  """One EnvPool environment as a `dm_env.Environment`.

  After a LAST step, `reset()` (or `step`) lets EnvPool reset the
  environment itself, so that Atari's episodic life continues the game after
  a lost life instead of restarting it; `reset()` in mid-episode resets fully.
  """

  def __init__(self, task: str, seed: Optional[int] = None, **kwargs):
    self._batch = EnvPoolBatchedEnvironment(task, 1, seed=seed, **kwargs)
    self._noop = np.zeros((1,) + self._batch.action_spec().shape,
                          self._batch.action_spec().dtype)
    self._state = 'new'   # 'new' | 'running' | 'last'

  @property
  def last_info(self):
    return self._batch.last_info

  def reset(self) -> dm_env.TimeStep:
    if self._state == 'last':
      timestep = self._batch.step(self._noop)
      assert timestep.step_type[0] == batched.FIRST, timestep
    else:
      timestep = self._batch.reset()
    self._state = 'running'
    return dm_env.restart(timestep.observation[0])

  def step(self, action) -> dm_env.TimeStep:
    if self._state != 'running':
      return self.reset()
    timestep = self._batch.step(np.asarray(action)[None])
    observation = timestep.observation[0]
    reward = float(timestep.reward[0])
    if timestep.step_type[0] == batched.LAST:
      self._state = 'last'
      discount = float(timestep.discount[0])
      if discount == 0.:
        return dm_env.termination(reward, observation)
      return dm_env.truncation(reward, observation, discount)
    return dm_env.transition(reward, observation)

  def observation_spec(self):
    return self._batch.observation_spec()

  def action_spec(self):
    return self._batch.action_spec()

  def close(self) -> None:
    self._batch.close()
