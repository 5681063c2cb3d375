"""`MinibatchEpochs` against a plain Python loop of PPO's epochs: the same
shuffles, the same updates in the same order, the same weights after."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import learners


def _model_and_step():
  """A linear model, plain SGD, and its step on a minibatch (x, y)."""
  weights = tf.Variable([[0.5], [-0.25], [1.0]], dtype=tf.float32)

  def step(x, y):
    with tf.GradientTape() as tape:
      error = tf.matmul(x, weights)[:, 0] - y
      loss = tf.reduce_mean(error ** 2)
    gradient = tape.gradient(loss, weights)
    applied = tf.reduce_all(tf.math.is_finite(gradient))
    weights.assign_sub(tf.where(applied, 0.1 * gradient, 0.0))
    return {'loss': loss, 'rows': tf.cast(tf.shape(x)[0], tf.float32),
            'applied': applied}

  signature = [tf.TensorSpec([None, 3], tf.float32),
               tf.TensorSpec([None], tf.float32)]
  return weights, tf.function(step, input_signature=signature,
                              autograph=False), step


def _reference(step, x, y, num_epochs, num_minibatches, seed, min_size=1):
  """PPO's inner loop as written in Python (SB3's and CleanRL's shape)."""
  rng = np.random.RandomState(seed)
  losses, rows, first = [], [], None
  for _ in range(num_epochs):
    order = rng.permutation(len(x))
    for part in np.array_split(order, num_minibatches):
      if len(part) < min_size:
        continue
      metrics = step(tf.constant(x[part]), tf.constant(y[part]))
      losses.append(float(metrics['loss']))
      rows.append(float(metrics['rows']))
      first = first or losses[0]
  return np.mean(losses), np.mean(rows), first, len(losses)


@pytest.mark.parametrize('n, num_epochs, num_minibatches, min_size', [
    (37, 3, 4, 1), (16, 2, 1, 1), (5, 2, 4, 2)])
def test_same_updates_as_a_python_loop(n, num_epochs, num_minibatches,
                                       min_size):
  rng = np.random.RandomState(7)
  x = rng.randn(n, 3).astype(np.float32)
  y = rng.randn(n).astype(np.float32)
  fused_weights, fused_step, _ = _model_and_step()
  plain_weights, _, plain_step = _model_and_step()

  got = learners.MinibatchEpochs(fused_step, num_epochs, num_minibatches,
                                 seed=3, min_size=min_size)(x, y)
  loss, rows, first, updates = _reference(
      plain_step, x, y, num_epochs, num_minibatches, seed=3,
      min_size=min_size)

  np.testing.assert_allclose(fused_weights.numpy(), plain_weights.numpy(),
                             rtol=1e-5)
  assert got['updates'] == updates
  assert got['skipped'] == 0
  np.testing.assert_allclose(got['loss'], loss, rtol=1e-5)
  np.testing.assert_allclose(got['rows'], rows, rtol=1e-6)
  np.testing.assert_allclose(got['first/loss'], first, rtol=1e-5)


def test_the_next_call_draws_new_shuffles():
  x = np.random.RandomState(0).randn(12, 3).astype(np.float32)
  y = np.zeros(12, np.float32)
  _, step, _ = _model_and_step()
  epochs = learners.MinibatchEpochs(step, 1, 3, seed=0)
  first, second = epochs(x, y), epochs(x, y)
  assert first['first/loss'] != second['first/loss']


def test_non_finite_updates_are_counted_and_not_applied():
  x = np.ones((8, 3), np.float32)
  y = np.zeros(8, np.float32)
  y[5] = np.nan                 # Every minibatch that holds row 5 is skipped.
  weights, step, _ = _model_and_step()
  got = learners.MinibatchEpochs(step, 2, 4, seed=1)(x, y)
  assert got['updates'] == 8
  assert got['skipped'] == 2    # One minibatch per epoch holds row 5.
  assert np.all(np.isfinite(weights.numpy()))


def test_no_minibatch_large_enough_means_no_update():
  _, step, _ = _model_and_step()
  got = learners.MinibatchEpochs(step, 2, 4, min_size=2)(
      np.ones((3, 3), np.float32), np.ones(3, np.float32))
  assert got == {'updates': 0, 'skipped': 0}


def test_same_updates_after_the_switch_to_the_optimized_graph():
  """Calls on either side of `unoptimized_calls` update as the plain loop
  (the no-op call that prepares the optimised graph changes nothing)."""
  rng = np.random.RandomState(2)
  x = rng.randn(20, 3).astype(np.float32)
  y = rng.randn(20).astype(np.float32)
  fused_weights, fused_step, _ = _model_and_step()
  plain_weights, _, plain_step = _model_and_step()
  epochs = learners.MinibatchEpochs(fused_step, 2, 2, seed=5,
                                    unoptimized_calls=2)
  reference_rng = np.random.RandomState(5)
  for _ in range(4):
    epochs(x, y)
    for _ in range(2):
      for part in np.array_split(reference_rng.permutation(20), 2):
        plain_step(tf.constant(x[part]), tf.constant(y[part]))
  np.testing.assert_allclose(fused_weights.numpy(), plain_weights.numpy(),
                             rtol=1e-5)


def test_the_no_op_call_updates_nothing():
  weights, step, _ = _model_and_step()
  epochs = learners.MinibatchEpochs(step, 3, 2, unoptimized_calls=0)
  before = weights.numpy().copy()
  epochs._run(*epochs._no_op_inputs())  # pylint: disable=protected-access
  np.testing.assert_array_equal(weights.numpy(), before)
