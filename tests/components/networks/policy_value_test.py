"""Policy-value networks: step vs unroll, heads, variables round trip."""

import types

from dm_env import specs
import numpy as np
import pytest
import tensorflow as tf

from repertory.components import networks

T, B, A = 4, 3, 2


def _obs(seed=0):
  return np.random.default_rng(seed).normal(size=(T, B, 4)).astype(np.float32)


def test_feedforward_network_step_and_unroll():
  net = networks.PolicyValueNetwork(networks.MLPTorso((8, 8)), num_actions=A)
  obs = _obs()
  out, state = net.unroll(obs, net.initial_state(B))
  assert state == ()
  assert isinstance(out, networks.PolicyValueOutput)
  assert out.logits.shape == (T, B, A) and out.value.shape == (T, B)
  step = net(obs[1])
  np.testing.assert_allclose(step.logits, out.logits[1], rtol=1e-5)
  np.testing.assert_allclose(step.value, out.value[1], rtol=1e-5)


@pytest.mark.parametrize('head', [dict(num_actions=A), dict(action_size=2)])
def test_a_value_torso_shares_nothing_with_the_policy(head):
  net = networks.PolicyValueNetwork(
      networks.MLPTorso((8,), name='policy_torso'), **head,
      value_torso=networks.MLPTorso((8,), name='value_torso'))
  obs = _obs()[0]
  with tf.GradientTape(persistent=True) as tape:
    out = net(obs)
    value = tf.reduce_sum(out.value)
    policy = (tf.reduce_sum(out.logits) if 'num_actions' in head
              else tf.reduce_sum(out.mean) + tf.reduce_sum(out.stddev))
  variables = net.trainable_variables
  value_grads = tape.gradient(value, variables)
  policy_grads = tape.gradient(policy, variables)
  for variable, dv, dp in zip(variables, value_grads, policy_grads):
    # Each variable feeds exactly one of the two outputs.
    assert (dv is None) != (dp is None), variable.name
    if 'policy_torso' in variable.name:
      assert dv is None
    if 'value_torso' in variable.name:
      assert dp is None
  assert any('value_torso' in v.name for v in variables)


def test_recurrent_network_step_and_unroll_agree():
  net = networks.RecurrentPolicyValueNetwork(
      networks.MLPTorso((8,)), num_actions=A, lstm_size=5)
  obs = _obs(1)
  reset = np.zeros((T, B), bool)
  reset[2, 0] = True
  out, final = net.unroll(obs, net.initial_state(B), reset)
  assert out.logits.shape == (T, B, A) and out.value.shape == (T, B)
  state = net.initial_state(B)
  for t in range(T):
    state = tf.nest.map_structure(
        lambda s: tf.where(reset[t][:, None], tf.zeros_like(s), s), state)  # pylint: disable=cell-var-from-loop
    step, state = net(obs[t], state)
    np.testing.assert_allclose(step.logits, out.logits[t], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(step.value, out.value[t], rtol=1e-5,
                               atol=1e-6)
  np.testing.assert_allclose(state.hidden, final.hidden, rtol=1e-5, atol=1e-6)


def test_gaussian_head():
  net = networks.PolicyValueNetwork(networks.MLPTorso((8,)), action_size=3)
  out = net(_obs()[0])
  assert isinstance(out, networks.GaussianPolicyValueOutput)
  assert out.mean.shape == (B, 3) and out.stddev.shape == (B, 3)
  np.testing.assert_allclose(out.stddev, np.ones((B, 3)))


def test_exactly_one_action_kind():
  with pytest.raises(ValueError, match='num_actions'):
    networks.PolicyValueNetwork(networks.MLPTorso(), num_actions=2,
                                action_size=2)
  with pytest.raises(ValueError, match='num_actions'):
    networks.PolicyValueNetwork(networks.MLPTorso())


def test_variables_round_trip_between_instances():
  def make():
    return networks.RecurrentPolicyValueNetwork(
        networks.MLPTorso((8,)), num_actions=A, lstm_size=5)

  learner_net, actor_net = make(), make()
  obs = _obs(2)
  for net in (learner_net, actor_net):
    net.unroll(obs, net.initial_state(B))
  values = networks.get_variables(learner_net)
  assert all(isinstance(v, np.ndarray) for v in values.values())
  assert set(values) == set(networks.get_variables(actor_net))
  assert any(name.startswith('torso/') for name in values), sorted(values)
  networks.assign_variables(actor_net, values)
  a, _ = learner_net.unroll(obs, learner_net.initial_state(B))
  b, _ = actor_net.unroll(obs, actor_net.initial_state(B))
  np.testing.assert_allclose(a.logits, b.logits)
  # get_variables returns copies.
  name = next(iter(values))
  values[name] += 1.0
  assert not np.allclose(networks.get_variables(learner_net)[name],
                         values[name])


def test_variable_reader_reads_the_current_values():
  net = networks.PolicyValueNetwork(networks.MLPTorso((8,)), num_actions=A)
  net(_obs(1)[0])
  read = networks.VariableReader(net)
  before = read()
  assert set(before) == set(networks.get_variables(net))
  for variable in networks.named_variables(net).values():
    variable.assign_add(tf.ones_like(variable))
  after = read()
  for name, value in networks.get_variables(net).items():
    np.testing.assert_array_equal(after[name], value)
    np.testing.assert_allclose(after[name], before[name] + 1.0)


def test_assign_variables_checks_before_writing():
  net = networks.PolicyValueNetwork(networks.MLPTorso((8,)), num_actions=A)
  net(_obs()[0])
  values = networks.get_variables(net)
  before = networks.get_variables(net)
  bad = dict(values)
  bad.pop(next(iter(bad)))
  bad['nonsense'] = np.zeros(1)
  with pytest.raises(ValueError, match='nonsense'):
    networks.assign_variables(net, bad)
  bad = {k: v + 1.0 for k, v in values.items()}
  last = list(bad)[-1]
  bad[last] = np.zeros((7, 7))
  with pytest.raises(ValueError, match='shape mismatch'):
    networks.assign_variables(net, bad)
  for k, v in networks.get_variables(net).items():
    np.testing.assert_array_equal(v, before[k])  # Nothing half-written.


def test_unbuilt_network_has_no_variables_yet():
  net = networks.PolicyValueNetwork(networks.MLPTorso((8,)), num_actions=A)
  with pytest.raises(ValueError, match='dummy batch'):
    networks.get_variables(net)


def test_mlp_policy_value_network_from_an_environment_spec():
  observations = specs.Array((10, 5), np.float32)
  discrete = networks.mlp_policy_value_network(types.SimpleNamespace(
      observations=observations,
      actions=specs.DiscreteArray(3, np.int32)), hidden_sizes=(8,))
  assert networks.named_variables(discrete)  # Built: weights can be served.
  output = discrete(tf.zeros((4, 10, 5)))
  assert output.logits.shape == (4, 3) and output.value.shape == (4,)
  continuous = networks.mlp_policy_value_network(types.SimpleNamespace(
      observations=observations,
      actions=specs.BoundedArray((2,), np.float32, -1.0, 1.0)))
  assert isinstance(continuous(tf.zeros((1, 10, 5))),
                    networks.GaussianPolicyValueOutput)
  with pytest.raises(ValueError, match='expected a discrete or a'):
    networks.mlp_policy_value_network(types.SimpleNamespace(
        observations=observations, actions=specs.Array((2, 2), np.float32)))
