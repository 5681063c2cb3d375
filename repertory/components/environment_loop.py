"""Runs an actor in an environment, counting and logging each episode."""

import time
from typing import Any, Dict, Optional

import dm_env
import numpy as np
import tree

from repertory import core
from repertory import launch
from repertory.components import counting
from repertory.components import loggers


class EnvironmentLoop(core.Worker):
  """Acme's environment loop: episodes of act / observe / update.

  Each episode increments the counter by `steps` and `episodes` (so a child
  counter with prefix 'actor' produces 'actor_steps', 'actor_episodes') and
  writes `episode_length`, `episode_return`, `steps_per_second` and the
  counts to the logger.

  Example::

    loop = EnvironmentLoop(environments.make('catch'), actor,
                           counter=Counter(counter_handle, 'actor'),
                           logger=make_logger('actor'))
    loop.run(num_episodes=10)
  """

  def __init__(self,
               environment: dm_env.Environment,
               actor: core.Actor,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None,
               should_update: bool = True,
               label: str = 'actor'):
    self._environment = environment
    self._actor = actor
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.make_logger(label)
    self._should_update = should_update

  def run_episode(self) -> Dict[str, Any]:
    """Runs one episode; returns (and logs) its statistics and the counts."""
    start = time.monotonic()
    timestep = self._environment.reset()
    self._actor.observe_first(timestep)
    episode_steps = 0
    episode_return = None
    while not timestep.last():
      action = self._actor.select_action(timestep.observation)
      timestep = self._environment.step(action)
      self._actor.observe(action, next_timestep=timestep)
      if self._should_update:
        self._actor.update()
      episode_steps += 1
      if timestep.reward is not None:
        reward = timestep.reward
        episode_return = (reward if episode_return is None else
                          tree.map_structure(np.add, episode_return, reward))
    counts = self._counter.increment(episodes=1, steps=episode_steps)
    elapsed = time.monotonic() - start
    result = {
        'episode_length': episode_steps,
        'episode_return': (0.0 if episode_return is None else episode_return),
        'steps_per_second': episode_steps / max(elapsed, 1e-9),
    }
    result.update(counts)
    return result

  def run(self,
          num_episodes: Optional[int] = None,
          num_steps: Optional[int] = None) -> int:
    """Runs until `num_episodes` or `num_steps` (whichever first) are done.

    With neither, runs until the launched program stops (or forever outside
    a program). Returns the number of steps taken.
    """
    if num_episodes is not None and num_episodes < 0:
      raise ValueError(f'num_episodes must be >= 0, got {num_episodes}.')
    if num_steps is not None and num_steps < 0:
      raise ValueError(f'num_steps must be >= 0, got {num_steps}.')
    stop_event = (launch.stop_event() if launch.get_launch_type() is not None
                  else None)
    episodes, steps = 0, 0
    while True:
      if num_episodes is not None and episodes >= num_episodes:
        break
      if num_steps is not None and steps >= num_steps:
        break
      if stop_event is not None and stop_event.is_set():
        break
      result = self.run_episode()
      episodes += 1
      steps += result['episode_length']
      self._logger.write(result)
    return steps
