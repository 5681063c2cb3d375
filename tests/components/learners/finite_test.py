"""Tests of finite-only updates and optimizer state creation."""

import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.components import learners


def _setup():
  network = snt.nets.MLP([4, 2])
  network(tf.zeros([1, 3]))
  return network, snt.optimizers.Adam(1e-2)


def _weights(network):
  return [v.numpy().copy() for v in network.trainable_variables]


def _make_step(network, optimizer):

  @tf.function
  def step(scale):
    with tf.GradientTape() as tape:
      # The target 1 keeps the output bias's gradient nonzero even when every
      # hidden ReLU happens to be dead at this initialization.
      loss = tf.reduce_sum((network(tf.ones([2, 3])) - 1.0) ** 2) * scale
    gradients = tape.gradient(loss, network.trainable_variables)
    return learners.apply_if_finite(optimizer, gradients,
                                    network.trainable_variables, loss)
  return step


def test_nan_and_inf_updates_change_neither_weights_nor_optimizer():
  network, optimizer = _setup()
  step = _make_step(network, optimizer)
  before = _weights(network)
  assert not bool(step(tf.constant(np.nan, tf.float32)))
  assert not bool(step(tf.constant(np.inf, tf.float32)))
  for got, want in zip(_weights(network), before):
    np.testing.assert_array_equal(got, want)
  assert int(optimizer.step.numpy()) == 0

  assert bool(step(tf.constant(1.0)))
  assert int(optimizer.step.numpy()) == 1
  assert any(not np.array_equal(a, b)
             for a, b in zip(_weights(network), before))


def test_keras_optimizer_is_supported():
  network, _ = _setup()
  optimizer = tf.keras.optimizers.SGD(0.1)
  step = _make_step(network, optimizer)
  before = _weights(network)
  assert not bool(step(tf.constant(np.nan, tf.float32)))
  for got, want in zip(_weights(network), before):
    np.testing.assert_array_equal(got, want)
  assert bool(step(tf.constant(1.0)))


def test_all_finite_ignores_integers_and_none():
  assert bool(learners.all_finite([tf.constant([1.0]), None,
                                   tf.constant([3], tf.int32)]))
  assert not bool(learners.all_finite({'a': tf.constant([1.0, np.nan])}))


def test_create_optimizer_state_is_a_no_op_that_creates_slots():
  network, optimizer = _setup()
  before = _weights(network)
  learners.create_optimizer_state(optimizer, network.trainable_variables)
  assert len(optimizer.m) == len(network.trainable_variables)
  assert int(optimizer.step.numpy()) == 0
  for got, want in zip(_weights(network), before):
    np.testing.assert_array_equal(got, want)
