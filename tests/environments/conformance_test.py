"""dm_env conformance (`dm_env.test_utils`) for every spec form of `make`."""

from absl.testing import absltest
from dm_env import test_utils
import numpy as np

from repertory import environments


class _SpecConformance(test_utils.EnvironmentTestMixin):
  """Runs dm_env's conformance checks on `make(SPEC)`; random actions long
  enough to cross at least one episode end."""

  SPEC = ''
  KWARGS = {}
  NUM_ACTIONS = 100

  def make_object_under_test(self):
    return environments.make(self.SPEC, seed=0, **self.KWARGS)

  def make_action_sequence(self):
    spec = self.environment.action_spec()
    rng = np.random.RandomState(0)
    for _ in range(self.NUM_ACTIONS):
      yield np.asarray(rng.randint(spec.num_values), dtype=spec.dtype)

  def test_reaches_an_episode_end(self):
    self.reset_environment()
    for action in self.make_action_sequence():
      if self.step_environment(action).last():
        return
    self.fail(f'{self.SPEC}: no LAST step in {self.NUM_ACTIONS} steps.')


class CatchTest(_SpecConformance, absltest.TestCase):
  SPEC = 'catch'
  NUM_ACTIONS = 30


class SmallCatchTest(_SpecConformance, absltest.TestCase):
  SPEC = 'catch:5x3'
  NUM_ACTIONS = 30


class BsuiteCatchTest(_SpecConformance, absltest.TestCase):
  SPEC = 'bsuite:catch/0'
  NUM_ACTIONS = 30


class BsuiteMemoryTest(_SpecConformance, absltest.TestCase):
  SPEC = 'bsuite:memory_len/3'
  NUM_ACTIONS = 30


class BsuiteDeepSeaTest(_SpecConformance, absltest.TestCase):
  SPEC = 'bsuite:deep_sea/5'
  NUM_ACTIONS = 60


class GymCartPoleTest(_SpecConformance, absltest.TestCase):
  SPEC = 'gym:CartPole-v1'


class MinAtarBreakoutTest(_SpecConformance, absltest.TestCase):
  SPEC = 'minatar:breakout'
  NUM_ACTIONS = 300


class AtariPongTest(_SpecConformance, absltest.TestCase):
  # A step limit makes an episode end quickly; episodic life (a lost life
  # ends a training episode) is tested in batched_test.py.
  SPEC = 'atari:Pong'
  KWARGS = dict(max_episode_steps=50, sticky_actions=True)


class EnvPoolCartPoleTest(_SpecConformance, absltest.TestCase):
  SPEC = 'envpool:CartPole-v1'


if __name__ == '__main__':
  absltest.main()
