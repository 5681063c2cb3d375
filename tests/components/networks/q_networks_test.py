"""Q networks: dueling head, R2D2 step vs unroll, burn-in, variables."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import networks

T, B, A = 6, 2, 3


def test_dueling_head_is_value_plus_centred_advantage():
  head = networks.DuelingQHead(A, hidden_sizes=(8,))
  x = tf.constant(np.random.default_rng(0).normal(size=(T, B, 5)),
                  tf.float32)
  q = head(x)
  assert q.shape == (T, B, A)
  value = head._value(tf.reshape(x, [-1, 5]))  # pylint: disable=protected-access
  adv = head._advantage(tf.reshape(x, [-1, 5]))  # pylint: disable=protected-access
  expected = value + adv - tf.reduce_mean(adv, -1, keepdims=True)
  np.testing.assert_allclose(tf.reshape(q, [-1, A]), expected, rtol=1e-5,
                             atol=1e-6)
  # Mean over actions of Q is V.
  np.testing.assert_allclose(tf.reduce_mean(tf.reshape(q, [-1, A]), -1),
                             value[:, 0], rtol=1e-5, atol=1e-6)


def test_q_network_on_steps_and_unrolls():
  net = networks.QNetwork(networks.MLPTorso((8,)), A, head_hidden_sizes=(8,))
  obs = np.random.default_rng(1).normal(size=(T, B, 4)).astype(np.float32)
  q, state = net.unroll(obs, net.initial_state(B))
  assert q.shape == (T, B, A) and state == ()
  np.testing.assert_allclose(net(obs[2]), q[2], rtol=1e-5, atol=1e-6)


def _r2d2_inputs(seed):
  rng = np.random.default_rng(seed)
  return networks.R2D2Input(
      observation=tf.constant(rng.normal(size=(T, B, 4)), tf.float32),
      prev_action=tf.constant(rng.integers(0, A, size=(T, B)), tf.int32),
      prev_reward=tf.constant(rng.normal(size=(T, B)), tf.float32))


def _r2d2():
  return networks.R2D2Network(networks.MLPTorso((8,)), A, lstm_size=7,
                              head_hidden_sizes=(8,))


def test_r2d2_step_and_unroll_agree():
  net = _r2d2()
  inputs = _r2d2_inputs(2)
  q, final = net.unroll(inputs, net.initial_state(B))
  assert q.shape == (T, B, A)
  state = net.initial_state(B)
  for t in range(T):
    step_in = tf.nest.map_structure(lambda x: x[t], inputs)  # pylint: disable=cell-var-from-loop
    q_t, state = net(step_in, state)
    np.testing.assert_allclose(q_t, q[t], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(state.hidden, final.hidden, rtol=1e-5, atol=1e-6)


def test_r2d2_uses_previous_action_and_reward():
  net = _r2d2()
  inputs = _r2d2_inputs(3)
  q, _ = net.unroll(inputs, net.initial_state(B))
  changed = inputs._replace(prev_reward=inputs.prev_reward + 1.0)
  q2, _ = net.unroll(changed, net.initial_state(B))
  assert not np.allclose(q, q2)
  changed = inputs._replace(prev_action=(inputs.prev_action + 1) % A)
  q3, _ = net.unroll(changed, net.initial_state(B))
  assert not np.allclose(q, q3)


def test_r2d2_rejects_plain_observations():
  net = _r2d2()
  with pytest.raises(TypeError, match='R2D2Input'):
    net(np.zeros((B, 4), np.float32), net.initial_state(B))


def test_r2d2_burn_in_blocks_gradients_to_burn_in_steps():
  net = _r2d2()
  inputs = _r2d2_inputs(4)
  burn_in = 2
  net.unroll(inputs, net.initial_state(B))  # Build the variables.
  with tf.GradientTape() as tape:
    tape.watch(inputs.observation)
    q, _ = networks.burn_in_unroll(net.unroll, inputs, net.initial_state(B),
                                   burn_in)
    loss = tf.reduce_sum(q)
  assert q.shape == (T - burn_in, B, A)
  grad = tape.gradient(loss, inputs.observation).numpy()
  assert not np.any(grad[:burn_in]) and np.any(grad[burn_in:])


def test_r2d2_variables_transfer_to_a_second_instance():
  learner, actor = _r2d2(), _r2d2()
  inputs = _r2d2_inputs(5)
  for net in (learner, actor):
    net.unroll(inputs, net.initial_state(B))
  networks.assign_variables(actor, networks.get_variables(learner))
  np.testing.assert_allclose(
      actor.unroll(inputs, actor.initial_state(B))[0],
      learner.unroll(inputs, learner.initial_state(B))[0])
