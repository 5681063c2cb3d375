"""SB3's policy-value network: orthogonal weights with the gains of SB3's
`ActorCriticPolicy` (√2 hidden, 0.01 logits, 1 value), zero biases, two
MLPs that share no variable."""

import math

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import networks
from repertory.components.networks import separate_mlp


def _built(num_actions=3, hidden_sizes=(64, 64), obs_size=4, seed=0):
  with networks.seeded(seed):
    network = separate_mlp.SeparatePolicyValueNetwork(num_actions,
                                                      hidden_sizes)
    network(tf.zeros((1, obs_size)))
  return network


def _layers(network):
  """{(mlp, layer index): (w, b)} as numpy, from the variable names."""
  out = {}
  for v in network.variables:
    mlp = 'policy' if '/policy/' in v.name else 'value'
    index = int(v.name.split('linear_')[1].split('/')[0])
    kind = 'w' if v.name.endswith('/w:0') else 'b'
    out.setdefault((mlp, index), {})[kind] = v.numpy()
  return out


def _orthogonality_error(w, gain):
  """|W^T W / gain² - I| for a tall W (`[in, out]`, in >= out), else
  |W W^T / gain² - I|: torch's `orthogonal_` on `[out, in]` gives the same."""
  gram = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
  return np.abs(gram / gain**2 - np.eye(len(gram))).max()


@pytest.mark.parametrize('obs_size, hidden_sizes', [(4, (64, 64)),
                                                    (100, (32, 16))])
def test_every_layer_is_orthogonal_with_sb3s_gain_and_zero_bias(
    obs_size, hidden_sizes):
  layers = _layers(_built(3, hidden_sizes, obs_size))
  depth = len(hidden_sizes) + 1
  assert sorted(layers) == sorted((m, i) for m in ('policy', 'value')
                                  for i in range(depth))
  for (mlp, index), params in layers.items():
    if index < depth - 1:
      gain = math.sqrt(2.0)
    else:
      gain = 0.01 if mlp == 'policy' else 1.0
    assert _orthogonality_error(params['w'], gain) < 1e-5, (mlp, index)
    np.testing.assert_array_equal(params['b'], 0.0)
  assert layers[('policy', depth - 1)]['w'].shape == (hidden_sizes[-1], 3)
  assert layers[('value', depth - 1)]['w'].shape == (hidden_sizes[-1], 1)


def test_first_policy_is_near_uniform_and_values_are_order_one():
  network = _built(2)
  observation = np.random.RandomState(0).normal(size=(512, 4)).astype(
      np.float32)
  output = network(observation)
  # Logits: 0.01 x a unit-norm projection of tanh features (|h| <= 1, 64 of
  # them): at most 0.01 x 8 in size.
  assert np.abs(output.logits.numpy()).max() < 0.08
  assert 0.05 < np.std(output.value.numpy()) < 3.0


def test_policy_and_value_share_no_variable():
  network = _built(2)
  observation = tf.random.normal((8, 4), seed=1)
  with tf.GradientTape(persistent=True) as tape:
    output = network(observation)
    value_loss = tf.reduce_sum(output.value)
    policy_loss = tf.reduce_sum(output.logits)
  variables = network.trainable_variables
  value_grads = tape.gradient(value_loss, variables)
  policy_grads = tape.gradient(policy_loss, variables)
  for v, gv, gp in zip(variables, value_grads, policy_grads):
    # Every variable feeds exactly one of the two outputs.
    assert (gv is None) != (gp is None), v.name
    assert ('/value/' in v.name) == (gv is not None), v.name


def test_shapes_over_time_and_batch_and_the_unroll_interface():
  network = _built(3)
  output = network(tf.zeros((5, 7, 4)))
  assert output.logits.shape == (5, 7, 3) and output.value.shape == (5, 7)
  unrolled, state = network.unroll(tf.zeros((5, 7, 4)),
                                   network.initial_state(7))
  assert state == ()
  np.testing.assert_array_equal(unrolled.value, output.value)


def test_seeded_construction_repeats_and_seeds_differ():
  a, b, c = _built(seed=3), _built(seed=3), _built(seed=4)
  for va, vb, vc in zip(a.variables, b.variables, c.variables):
    np.testing.assert_array_equal(va.numpy(), vb.numpy())
  assert not np.array_equal(a.variables[-1].numpy(), c.variables[-1].numpy())


def test_policy_value_mlp_builds_each_kind_by_name():
  shared = separate_mlp.policy_value_mlp('shared_relu', (8,), 1, 2)
  assert isinstance(shared, networks.PolicyValueNetwork)
  separate = separate_mlp.policy_value_mlp('separate_tanh', (8,), 1, 2)
  assert isinstance(separate, separate_mlp.SeparatePolicyValueNetwork)
  with pytest.raises(ValueError, match=r"'tanh'.*shared_relu, separate_tanh"):
    separate_mlp.policy_value_mlp('tanh', (8,), 1, 2)


@pytest.mark.parametrize('kwargs, match', [
    (dict(output_sizes=(), gains=()), 'output_sizes'),
    (dict(output_sizes=(4, 2), gains=(1.0,)), '1 gains for 2 layers'),
    (dict(output_sizes=(4,), gains=(1.0,), obs_rank=0), 'obs_rank')])
def test_orthogonal_mlp_rejects_bad_arguments(kwargs, match):
  with pytest.raises(ValueError, match=match):
    separate_mlp.OrthogonalMLP(**kwargs)
