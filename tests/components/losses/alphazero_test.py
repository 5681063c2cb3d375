"""`losses.alphazero_loss` against a plain per-position reference written
from the paper's l = (z - v)² - πᵀ log p (L2 left to the learner)."""

import math

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import losses


def _reference(logits, value, search_policy, outcome, legal, value_cost):
  policy, values, kls = [], [], []
  for b in range(len(logits)):
    moves = [a for a in range(len(logits[b])) if legal[b][a]]
    top = max(logits[b][a] for a in moves)
    norm = sum(math.exp(logits[b][a] - top) for a in moves)
    log_p = {a: logits[b][a] - top - math.log(norm) for a in moves}
    ce = -sum(search_policy[b][a] * log_p[a] for a in moves
              if search_policy[b][a] > 0)
    entropy = -sum(q * math.log(q) for q in search_policy[b] if q > 0)
    policy.append(ce)
    kls.append(ce - entropy)
    values.append((outcome[b] - value[b]) ** 2)
  policy_loss, value_loss = np.mean(policy), np.mean(values)
  return policy_loss + value_cost * value_loss, policy_loss, value_loss, (
      np.mean(kls))


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_matches_the_reference(seed):
  rng = np.random.default_rng(seed)
  b, a = 6, 7
  logits = rng.normal(size=(b, a)) * 3
  legal = (rng.uniform(size=(b, a)) < 0.7).astype(np.float32)
  legal[:, 0] = 1.0
  visits = rng.integers(0, 20, size=(b, a)) * legal
  visits[:, 0] += 1
  search_policy = visits / visits.sum(-1, keepdims=True)
  value = np.tanh(rng.normal(size=b))
  outcome = rng.choice([-1.0, 0.0, 1.0], size=b)
  out = losses.alphazero_loss(*(tf.constant(x, tf.float32) for x in (
      logits, value, search_policy, outcome, legal)), value_cost=0.5)
  total, policy_loss, value_loss, kl = _reference(
      logits, value, search_policy, outcome, legal, 0.5)
  np.testing.assert_allclose(out.loss.numpy(), total, rtol=1e-5)
  np.testing.assert_allclose(out.extra['policy_loss'].numpy(), policy_loss,
                             rtol=1e-5)
  np.testing.assert_allclose(out.extra['value_loss'].numpy(), value_loss,
                             rtol=1e-5)
  np.testing.assert_allclose(out.extra['policy_kl'].numpy(), kl, rtol=1e-4,
                             atol=1e-6)


def test_gradients_are_finite_and_zero_on_illegal_moves():
  logits = tf.Variable([[1.0, 2.0, -3.0]])
  value = tf.Variable([0.3])
  with tf.GradientTape() as tape:
    out = losses.alphazero_loss(logits, value, tf.constant([[0.25, 0.75, 0.]]),
                                tf.constant([1.0]),
                                tf.constant([[1.0, 1.0, 0.0]]))
  grad_logits, grad_value = tape.gradient(out.loss, [logits, value])
  assert np.all(np.isfinite(grad_logits.numpy()))
  assert grad_logits.numpy()[0, 2] == 0.0
  np.testing.assert_allclose(grad_value.numpy(), [2 * (0.3 - 1.0)], rtol=1e-6)
  # The policy gradient is p - π over the legal moves.
  p = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
  np.testing.assert_allclose(grad_logits.numpy()[0, :2], p - [0.25, 0.75],
                             rtol=1e-5)


def test_names_mismatched_inputs():
  with pytest.raises(ValueError, match=r"alphazero_loss: inputs must share "
                     r"one shape \(logits's \[2, 3\]\), but search_policy"):
    losses.alphazero_loss(tf.zeros((2, 3)), tf.zeros(2), tf.zeros((2, 4)),
                          tf.zeros(2), tf.ones((2, 3)))
  with pytest.raises(ValueError, match=r'value has shape \[3\], expected '
                     r'\[2\] \(one per position\)'):
    losses.alphazero_loss(tf.zeros((2, 3)), tf.zeros(3), tf.zeros((2, 3)),
                          tf.zeros(3), tf.ones((2, 3)))
