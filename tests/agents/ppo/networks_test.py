"""PPO's acting policy: a graph of its own that matches the eager network
and creates no Python objects that outlive a call (TF 2.15 on CPython 3.11
leaks one block per EagerTensor)."""

import gc
import sys

import numpy as np
import pytest
import tensorflow as tf

from repertory import experiment as experiment_lib
from repertory.components.actor_critic import mlp_policy as networks_lib
from repertory.components import networks


@pytest.fixture(scope='module')
def specs():
  spec = experiment_lib.environment_spec('catch')
  return spec.observations, spec.actions


@pytest.mark.parametrize('kind', ['shared_relu', 'separate_tanh'])
def test_policy_matches_the_eager_network(specs, kind):
  observation_spec, action_spec = specs
  network = networks_lib.make_network((16, 8), observation_spec, action_spec,
                                      kind)
  policy = networks_lib.Policy((16, 8), observation_spec, action_spec, seed=3,
                               network=kind)
  policy.set_weights(networks.get_variables(network))
  observation = np.random.RandomState(0).rand(
      6, *observation_spec.shape).astype(observation_spec.dtype)
  action, log_prob, value = policy.act(observation)
  output = network(observation)
  np.testing.assert_allclose(value, output.value.numpy(), rtol=1e-5,
                             atol=1e-6)
  expected_log_prob = tf.nn.log_softmax(output.logits).numpy()[
      np.arange(6), action]
  np.testing.assert_allclose(log_prob, expected_log_prob, rtol=1e-5,
                             atol=1e-6)
  assert action.dtype == np.int32 and action.shape == (6,)
  assert set(action) <= set(range(action_spec.num_values))
  greedy = networks_lib.Policy((16, 8), observation_spec, action_spec,
                               greedy=True, network=kind)
  greedy.set_weights(networks.get_variables(network))
  np.testing.assert_array_equal(
      greedy.act(observation)[0], np.argmax(output.logits.numpy(), -1))


def test_sampling_follows_the_seed(specs):
  observation_spec, action_spec = specs
  observation = np.zeros((64,) + observation_spec.shape,
                         observation_spec.dtype)
  draws = [networks_lib.Policy((8,), observation_spec, action_spec,
                               seed=seed).act(observation)[0]
           for seed in (1, 1, 2)]
  np.testing.assert_array_equal(draws[0], draws[1])
  assert not np.array_equal(draws[0], draws[2])


def test_acting_leaves_no_python_objects_behind(specs):
  observation_spec, action_spec = specs
  policy = networks_lib.Policy((16,), observation_spec, action_spec)
  observation = np.zeros((8,) + observation_spec.shape,
                         observation_spec.dtype)
  for _ in range(200):
    policy.act(observation)
  gc.collect()
  before = sys.getallocatedblocks()
  for _ in range(2000):
    policy.act(observation)
  gc.collect()
  # A tf.function step would leave ~4 blocks per call here (8,000).
  assert sys.getallocatedblocks() - before < 200


def test_set_weights_of_another_network_kind_are_refused(specs):
  observation_spec, action_spec = specs
  shared = networks_lib.make_network((16,), observation_spec, action_spec,
                                     'shared_relu')
  policy = networks_lib.Policy((16,), observation_spec, action_spec,
                               network='separate_tanh')
  with pytest.raises(KeyError, match='no values for'):
    policy.set_weights(networks.get_variables(shared))


def test_set_weights_names_missing_variables(specs):
  observation_spec, action_spec = specs
  policy = networks_lib.Policy((16,), observation_spec, action_spec)
  with pytest.raises(KeyError, match='no values for'):
    policy.set_weights({})
