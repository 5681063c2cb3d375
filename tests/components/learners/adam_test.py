"""Tests of `learners.Adam` against Adam written from the paper and against
Sonnet's own."""

import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf

from repertory.components import learners


def _reference_adam(params, gradients, lr, beta1=0.9, beta2=0.999, eps=1e-8):
  """Kingma & Ba 2015, Algorithm 1, in NumPy (float64), epsilon added to
  the bias-corrected sqrt(v) as Sonnet and PyTorch add it."""
  params = [p.astype(np.float64) for p in params]
  m = [np.zeros_like(p) for p in params]
  v = [np.zeros_like(p) for p in params]
  for t, step_gradients in enumerate(gradients, start=1):
    for i, g in enumerate(step_gradients):
      if g is None:
        continue
      m[i] = beta1 * m[i] + (1 - beta1) * g
      v[i] = beta2 * v[i] + (1 - beta2) * g * g
      m_hat = m[i] / (1 - beta1 ** t)
      v_hat = v[i] / (1 - beta2 ** t)
      params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
  return params, m, v


def _problem(seed=0, steps=50, dtype=np.float32):
  rng = np.random.default_rng(seed)
  params = [rng.normal(size=(4, 3)).astype(dtype),
            rng.normal(size=(3,)).astype(dtype)]
  # Gradients over six orders of magnitude, so that epsilon matters.
  gradients = [[(rng.normal(size=p.shape) * 10.0 ** rng.uniform(-6, 0))
                .astype(dtype) for p in params] for _ in range(steps)]
  return params, gradients


@pytest.mark.parametrize('eps', [1e-8, 1e-5, 1e-3])
def test_matches_the_paper_and_sonnet(eps):
  params, gradients = _problem()
  want, want_m, want_v = _reference_adam(params, gradients, 1e-2, eps=eps)
  ours = [tf.Variable(p) for p in params]
  sonnets = [tf.Variable(p) for p in params]
  optimizer = learners.Adam(1e-2, epsilon=eps)
  sonnet_optimizer = snt.optimizers.Adam(1e-2, epsilon=eps)
  for step_gradients in gradients:
    optimizer.apply([tf.constant(g) for g in step_gradients], ours)
    sonnet_optimizer.apply([tf.constant(g) for g in step_gradients], sonnets)
  assert int(optimizer.step.numpy()) == len(gradients)
  for got, sonnet, reference in zip(ours, sonnets, want):
    np.testing.assert_allclose(got.numpy(), reference, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.numpy(), sonnet.numpy(), rtol=1e-5,
                               atol=1e-6)
  for got, reference in zip(optimizer.m, want_m):
    np.testing.assert_allclose(got.numpy(), reference, rtol=1e-4, atol=1e-9)
  for got, reference in zip(optimizer.v, want_v):
    np.testing.assert_allclose(got.numpy(), reference, rtol=1e-4, atol=1e-12)


def test_in_a_tf_function_with_a_learning_rate_variable_and_float64():
  params, gradients = _problem(seed=1, steps=20, dtype=np.float64)
  rate = tf.Variable(1e-2, dtype=tf.float64, trainable=False)
  variables = [tf.Variable(p) for p in params]
  optimizer = learners.Adam(rate, epsilon=1e-5)

  @tf.function(autograph=False)
  def step(g0, g1):
    optimizer.apply([g0, g1], variables)

  for t, (g0, g1) in enumerate(gradients):
    rate.assign(1e-2 if t < 10 else 5e-3)  # Read at every call (annealing).
    step(g0, g1)
  # The paper's Adam in two halves: step size 1e-2, then 5e-3 from the
  # first half's moments and step on.
  want, m, v = _reference_adam(params, gradients[:10], 1e-2, eps=1e-5)
  for t, step_gradients in enumerate(gradients[10:], start=11):
    for i, g in enumerate(step_gradients):
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      want[i] = want[i] - 5e-3 * (m[i] / (1 - 0.9 ** t)) / (
          np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-5)
  # rtol: Sonnet (and so this class) casts its Python-float betas through
  # float32 (tf.cast of 0.9 is float64(float32(0.9))), ~5e-8 apart here.
  for got, reference in zip(variables, want):
    assert got.dtype == tf.float64
    np.testing.assert_allclose(got.numpy(), reference, rtol=1e-6)


def test_none_updates_leave_their_parameter_alone():
  params, gradients = _problem(steps=3)
  variables = [tf.Variable(p) for p in params]
  optimizer = learners.Adam(1e-2)
  for step_gradients in gradients:
    optimizer.apply([tf.constant(step_gradients[0]), None], variables)
  np.testing.assert_array_equal(variables[1].numpy(), params[1])
  np.testing.assert_array_equal(optimizer.m[1].numpy(), 0.0)
  want, _, _ = _reference_adam(params, [[g[0], None] for g in gradients],
                               1e-2)
  np.testing.assert_allclose(variables[0].numpy(), want[0], rtol=1e-5)


def test_checkpoints_are_sonnets(tmp_path):
  """A checkpoint of Sonnet's Adam restores into this one and back."""
  params, gradients = _problem(steps=5)
  sonnet_vars = [tf.Variable(p) for p in params]
  sonnet_optimizer = snt.optimizers.Adam(1e-2)
  for g in gradients:
    sonnet_optimizer.apply([tf.constant(x) for x in g], sonnet_vars)
  path = tf.train.Checkpoint(optimizer=sonnet_optimizer).save(
      str(tmp_path / 'ckpt'))
  optimizer = learners.Adam(1e-2)
  learners.create_optimizer_state(optimizer,
                                  [tf.Variable(p) for p in params])
  tf.train.Checkpoint(optimizer=optimizer).restore(path).assert_consumed()
  assert int(optimizer.step.numpy()) == 5
  for ours, theirs in zip(optimizer.m + optimizer.v,
                          sonnet_optimizer.m + sonnet_optimizer.v):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_sparse_updates_go_through_sonnet():
  table = tf.Variable(np.ones((5, 2), np.float32))
  optimizer = learners.Adam(0.1)
  update = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([3]),
                            tf.constant([5, 2]))
  optimizer.apply([update], [table])
  changed = np.where(np.any(table.numpy() != 1.0, axis=1))[0]
  np.testing.assert_array_equal(changed, [3])


def test_mismatched_updates_are_refused():
  variables = [tf.Variable(np.zeros(2, np.float32))]
  with pytest.raises(ValueError, match='2 updates for 1 parameters'):
    learners.Adam().apply([tf.zeros(2), tf.zeros(2)], variables)
  with pytest.raises(ValueError, match='float64'):
    learners.Adam().apply([tf.zeros(2, tf.float64)], variables)
