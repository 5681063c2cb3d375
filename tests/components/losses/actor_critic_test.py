"""A3C n-step actor-critic loss vs a sequential reference."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import losses

T, B, A = 5, 4, 3


def _inputs(seed):
  rng = np.random.default_rng(seed)
  discount_t = np.full((T, B), 0.99, np.float32)
  discount_t[1, 0] = discount_t[3, 2] = 0.0
  return dict(
      logits=rng.normal(size=(T, B, A)).astype(np.float32),
      actions=rng.integers(0, A, size=(T, B)).astype(np.int32),
      v_tm1=rng.normal(size=(T, B)).astype(np.float32),
      bootstrap_value=rng.normal(size=(B,)).astype(np.float32),
      r_t=rng.normal(size=(T, B)).astype(np.float32),
      discount_t=discount_t)


def reference_a3c(logits, actions, v_tm1, bootstrap_value, r_t, discount_t,
                  baseline_cost, entropy_cost):
  """Algorithm S3 of Mnih et al. 2016: R ← r_i + γR from i = t-1 down to t_start."""
  n_steps, n_seqs = v_tm1.shape
  policy, baseline, entropy = 0.0, 0.0, 0.0
  for b in range(n_seqs):
    ret = float(bootstrap_value[b])
    for i in reversed(range(n_steps)):
      ret = r_t[i, b] + discount_t[i, b] * ret
      z = np.float64(logits[i, b]) - np.max(logits[i, b])
      log_pi = z - np.log(np.exp(z).sum())
      adv = ret - v_tm1[i, b]
      policy += -log_pi[actions[i, b]] * adv
      baseline += 0.5 * adv ** 2
      entropy += -(np.exp(log_pi) * log_pi).sum()
  n = n_steps * n_seqs
  return (policy + baseline_cost * baseline - entropy_cost * entropy) / n


def test_matches_reference():
  data = _inputs(0)
  got = losses.actor_critic_loss(**data, baseline_cost=0.5, entropy_cost=0.02)
  expected = reference_a3c(**data, baseline_cost=0.5, entropy_cost=0.02)
  np.testing.assert_allclose(got.loss, expected, rtol=1e-5, atol=1e-6)


def test_gradients_do_not_reach_returns():
  data = _inputs(1)
  tensors = {k: tf.constant(data[k]) for k in
             ('logits', 'v_tm1', 'bootstrap_value', 'r_t', 'discount_t')}
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(list(tensors.values()))
    out = losses.actor_critic_loss(actions=data['actions'], **tensors)
  for name in ('bootstrap_value', 'r_t', 'discount_t'):
    assert tape.gradient(out.loss, tensors[name]) is None, name
  returns = losses.discounted_returns(data['r_t'], data['discount_t'],
                                      data['bootstrap_value'])
  # Only the baseline term reaches V: -baseline_cost (R - V) / N.
  np.testing.assert_allclose(
      tape.gradient(out.loss, tensors['v_tm1']),
      -0.5 * (returns - data['v_tm1']) / (T * B), rtol=1e-4, atol=1e-7)
  assert np.any(tape.gradient(out.loss, tensors['logits']).numpy())


def test_shape_mismatch():
  data = _inputs(2)
  data['v_tm1'] = data['v_tm1'][1:]
  with pytest.raises(ValueError, match='v_tm1'):
    losses.actor_critic_loss(**data)
