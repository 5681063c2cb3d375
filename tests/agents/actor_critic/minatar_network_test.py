"""The MinAtar paper's network (`networks.MinAtarTorso`): chosen for
MinAtar's boards, and the numpy actors' forward equals the learner's Sonnet
forward with the same weights."""

from dm_env import specs
import numpy as np
import pytest
import tensorflow as tf

from repertory.agents import apex
from repertory.agents import impala
from repertory.agents.actor_critic import networks as actor_critic_nets
from repertory.agents.actor_critic import numpy_policy
from repertory.agents.apex import networks as apex_networks
from repertory.components import networks
from repertory.components import specs as specs_lib

BOARD = specs.Array((10, 10, 4), bool, name='board')  # MinAtar Breakout's.
ACTIONS = specs.DiscreteArray(3)


def _boards(rng, shape):
  return rng.random(shape + BOARD.shape) < 0.15


@pytest.mark.parametrize('spec,expected', [
    (BOARD, 'minatar'), (specs.Array((4,), np.float32), 'mlp'),
    (specs.Array((84, 84, 4), np.uint8), 'mlp')])
def test_auto_picks_the_minatar_torso_for_boolean_boards(spec, expected):
  assert specs_lib.resolve_torso('auto', spec) == expected
  assert specs_lib.resolve_torso('mlp', spec) == 'mlp'


def test_the_minatar_torso_is_refused_for_flat_observations():
  with pytest.raises(ValueError, match=r"torso='minatar'.*\(4,\)"):
    specs_lib.resolve_torso('minatar', specs.Array((4,), np.float32))
  with pytest.raises(ValueError, match="'cnn'.*minatar"):
    impala.Config(torso='cnn')


@pytest.mark.parametrize('shared_torso', [True, False])
def test_numpy_forward_equals_the_sonnet_forward(shared_torso):
  config = impala.Config(shared_torso=shared_torso)
  with networks.seeded(0):
    network = actor_critic_nets.make_network(config, BOARD, ACTIONS)
  weights = networks.get_variables(network)
  # The paper's sizes: 16 3x3 filters over 4 channels, 8x8x16 -> 128.
  assert weights['torso/conv/w'].shape == (3, 3, 4, 16)
  assert weights['torso/linear/w'].shape == (8 * 8 * 16, 128)
  assert ('value_torso/conv/w' in weights) == (not shared_torso)
  boards = _boards(np.random.default_rng(1), (2, 16))  # [T, B, 10, 10, 4].
  expected = network(tf.constant(boards))  # The learner's [T, B] call.
  policy = numpy_policy.LogitsPolicy()
  policy.set_weights(weights)
  logits, values = policy.outputs(boards.reshape((32,) + BOARD.shape))
  np.testing.assert_allclose(logits, expected.logits.numpy().reshape(32, 3),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(values, expected.value.numpy().reshape(32),
                             rtol=1e-5, atol=1e-5)
  assert np.std(logits) > 1e-3  # The boards reach the logits.


def test_apex_q_network_takes_the_minatar_torso():
  spec = specs_lib.EnvironmentSpec(BOARD, ACTIONS, None, None)
  network = apex_networks.make_network(spec, apex.Config())
  weights = networks.get_variables(network)
  assert weights['torso/conv/w'].shape == (3, 3, 4, 16)
  q = network(tf.constant(_boards(np.random.default_rng(2), (5,))))
  assert q.shape == (5, 3)
  mlp = apex_networks.make_network(spec, apex.Config(torso='mlp'))
  assert 'torso/conv/w' not in networks.get_variables(mlp)
