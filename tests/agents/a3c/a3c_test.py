"""A3C: config checks, the parameter server, a test_mt smoke test."""

import time

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import a3c
from repertory.agents.a3c import acting
from repertory.agents.a3c import learning
from repertory.agents.a3c import networks as a3c_networks
from repertory.components import checkpointing
from repertory.agents.actor_critic import mlp_policy as networks_lib

CATCH = experiment_lib.environment_spec('catch')
TINY = dict(unroll_length=5, hidden_sizes=(16,))


@pytest.mark.parametrize('field, value', [
    ('unroll_length', 0), ('learning_rate', 0.0), ('optimizer', 'sgd'),
    ('discount', 1.5), ('max_grad_norm', 0.0), ('hidden_sizes', ()),
    ('entropy_cost', -1.0)])
def test_config_rejects_bad_values(field, value):
  with pytest.raises(ValueError, match=field):
    a3c.Config(**{field: value})


def _learner(config):
  return learning.make_learner(config, CATCH)


def _push(learner, gradients, version, actor_id=0):
  return learner.update(gradients, version, actor_id)['learner/version']


def test_staleness_is_learner_version_minus_gradient_version():
  config = a3c.Config(**TINY)
  learner = _learner(config)
  actors = [acting.A3CActor(i, config, 'catch', 2, seed=i, learner=learner)
            for i in range(2)]
  # Both actors pull version 0; actor 0 pushes first (staleness 0), actor 1
  # then pushes a gradient computed on version 0 to a learner at 1.
  pulled = [actor.pull() for actor in actors]
  gradients = [actor.compute_gradients(actor.rollout())[0]
               for actor in actors]
  assert pulled == [0, 0]
  before = a3c_networks.variable_list(learner.algorithm.network)[0].numpy().copy()
  assert _push(learner, gradients[0], 0, actor_id=0) == 1
  metrics = learner.update(gradients[1], 0, 1)
  assert metrics['learner/version'] == 2
  assert metrics['charts/staleness'] == 1
  after = a3c_networks.variable_list(learner.algorithm.network)[0].numpy()
  assert not np.allclose(before, after)
  assert learner.algorithm.mean_staleness == pytest.approx(0.5)
  assert learner.algorithm.applied_per_actor == {0: 1, 1: 1}
  assert learner.step()['learner/steps'] == 2
  # A step pulls the newest weights first, so its gradient is fresh here.
  assert actors[0].step() == 3
  assert learner.algorithm.mean_staleness == pytest.approx(1 / 3)


def test_rejects_gradients_of_the_wrong_shape():
  learner = _learner(a3c.Config(**TINY))
  with pytest.raises(ValueError, match='gradient shapes'):
    _push(learner, [np.zeros(3, np.float32)], 0)


def test_smoke_test_mt(tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='a3c', env='catch', num_actors=2, envs_per_actor=2,
      max_actor_steps=10**9, logdir=str(tmp_path), launch_type='test_mt')
  program = a3c.make_program(a3c.Config(**TINY), experiment)
  launched = launch.launch(program, launch_type='test_mt')
  try:
    learner = program.groups['learner'][0].create_handle().dereference()
    counter = program.groups['counter'][0].create_handle().dereference()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
      counts = counter.get_counts()
      if counts.get('policy_lag_items', 0) >= 10:
        break
      time.sleep(0.2)
    assert counts['policy_lag_items'] >= 10      # Staleness recorded...
    assert counts['policy_lag_sum'] >= 0
    assert counts['learner_steps'] == counts['policy_lag_items']
    assert learner.get_variables(['policy']).version >= 10
  finally:
    launched.stop(timeout=60)
