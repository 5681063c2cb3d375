"""Prioritized-replay importance weights vs the formula, one item at a time."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import losses


def test_matches_reference():
  probabilities = np.array([0.1, 0.02, 0.5, 0.001], np.float32)
  n, beta = 1000, 0.6
  got = losses.importance_sampling_weights(probabilities, n, beta)
  raw = [(n * p) ** (-beta) for p in np.float64(probabilities)]
  expected = [w / max(raw) for w in raw]
  np.testing.assert_allclose(got, expected, rtol=1e-5)
  assert np.isclose(np.max(got), 1.0)


def test_beta_zero_gives_ones_and_table_size_per_item():
  probabilities = tf.constant([0.3, 0.2, 0.5])
  np.testing.assert_allclose(
      losses.importance_sampling_weights(probabilities, 3, 0.0), np.ones(3))
  got = losses.importance_sampling_weights(
      probabilities, tf.constant([10, 10, 10], tf.int64), 1.0)
  np.testing.assert_allclose(got, [0.2 / 0.3, 1.0, 0.2 / 0.5], rtol=1e-5)


def test_bad_inputs():
  with pytest.raises(ValueError, match='beta'):
    losses.importance_sampling_weights([0.5, 0.5], 2, 1.5)
  with pytest.raises(tf.errors.InvalidArgumentError, match='probability'):
    losses.importance_sampling_weights([0.5, 0.0], 2, 0.5)
