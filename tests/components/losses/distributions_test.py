"""Log-probability and entropy helpers vs their closed forms."""

import math

import numpy as np
import pytest

from repertory.components import losses


def test_categorical():
  logits = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0]], np.float32)
  actions = np.array([1, 2], np.int32)
  probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(losses.categorical_log_prob(logits, actions),
                             np.log(probs[[0, 1], actions]), rtol=1e-6)
  np.testing.assert_allclose(losses.categorical_entropy(logits),
                             -(probs * np.log(probs)).sum(-1), rtol=1e-6)
  with pytest.raises(ValueError, match='actions'):
    losses.categorical_log_prob(logits, actions[:1])


def test_gaussian():
  mean = np.array([[0.0, 1.0]], np.float32)
  stddev = np.array([[1.0, 0.5]], np.float32)
  actions = np.array([[0.3, 0.2]], np.float32)
  expected = sum(
      -0.5 * ((a - m) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi)
      for a, m, s in zip(actions[0], mean[0], stddev[0]))
  np.testing.assert_allclose(
      losses.gaussian_log_prob(mean, stddev, actions), [expected], rtol=1e-6)
  expected_entropy = sum(0.5 * math.log(2 * math.pi * math.e * s ** 2)
                         for s in stddev[0])
  np.testing.assert_allclose(losses.gaussian_entropy(stddev),
                             [expected_entropy], rtol=1e-6)
