"""EnvironmentLoop on the real catch environment with a random actor."""

import numpy as np

from repertory import core
from repertory import environments
from repertory.components import counting
from repertory.components import loggers
from repertory.components.environment_loop import EnvironmentLoop


class RandomActor(core.Actor):

  def __init__(self, action_spec):
    self._spec = action_spec
    self._rng = np.random.default_rng(0)
    self.observed = 0
    self.updates = 0

  def select_action(self, observation):
    return np.int32(self._rng.integers(self._spec.num_values))

  def observe_first(self, timestep):
    assert timestep.first()

  def observe(self, action, next_timestep):
    self.observed += 1

  def update(self, wait=False):
    self.updates += 1


def test_runs_episodes_counts_and_logs():
  env = environments.make('catch')
  actor = RandomActor(env.action_spec())
  root = counting.Counter()
  logger = loggers.InMemoryLogger()
  loop = EnvironmentLoop(env, actor, counter=counting.Counter(
      root, 'actor', time_delta=0.0), logger=logger)
  steps = loop.run(num_episodes=3)
  assert len(logger.data) == 3
  assert steps == actor.observed == actor.updates
  assert sum(r['episode_length'] for r in logger.data) == steps
  assert root.get_counts() == {'actor_episodes': 3, 'actor_steps': steps}
  assert all(r['episode_return'] in (-1.0, 1.0) for r in logger.data)
  assert logger.data[-1]['actor_steps'] == steps


def test_num_steps_stops_after_the_episode_that_reaches_it():
  env = environments.make('catch')
  loop = EnvironmentLoop(env, RandomActor(env.action_spec()),
                         logger=loggers.InMemoryLogger())
  steps = loop.run(num_steps=1)
  assert steps >= 1
