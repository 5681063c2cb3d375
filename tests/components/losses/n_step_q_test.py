"""Value rescaling, n-step double Q and R2D2 priorities vs references."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import losses

T, B, A = 8, 3, 4
EPS = 1e-3


def h_ref(x):
  x = np.float64(x)
  return np.sign(x) * (np.sqrt(np.abs(x) + 1) - 1) + EPS * x


def h_inv_ref(x):
  x = np.float64(x)
  return np.sign(x) * (((np.sqrt(1 + 4 * EPS * (np.abs(x) + 1 + EPS)) - 1)
                        / (2 * EPS)) ** 2 - 1)


VALUES = np.concatenate([
    [0.0, 1e-7, -1e-7, 1e-4, -3e-3, 0.5, -1.0, 7.0, -42.0, 1e3, -1e4, 1e5],
    np.random.default_rng(0).normal(scale=30.0, size=100)]).astype(np.float32)


def test_transform_matches_paper_formula():
  np.testing.assert_allclose(losses.signed_hyperbolic(VALUES), h_ref(VALUES),
                             rtol=2e-6, atol=1e-7)
  np.testing.assert_allclose(losses.signed_parabolic(VALUES),
                             h_inv_ref(VALUES), rtol=2e-6, atol=1e-7)


def test_numpy_transform_matches_paper_formula_in_float64():
  tx = losses.numpy_signed_hyperbolic_transform(EPS)
  values = VALUES.astype(np.float64)
  assert tx.apply(values).dtype == np.float64
  np.testing.assert_allclose(tx.apply(values), h_ref(values), rtol=1e-12,
                             atol=1e-14)
  np.testing.assert_allclose(tx.apply_inverse(values), h_inv_ref(values),
                             rtol=1e-9, atol=1e-12)


def test_transform_round_trips():
  tx = losses.SIGNED_HYPERBOLIC_TRANSFORM
  np.testing.assert_allclose(tx.apply(tx.apply_inverse(VALUES)), VALUES,
                             rtol=2e-6, atol=1e-7)
  np.testing.assert_allclose(tx.apply_inverse(tx.apply(VALUES)), VALUES,
                             rtol=2e-6, atol=1e-7)
  other = losses.signed_hyperbolic_transform(0.1)
  np.testing.assert_allclose(other.apply_inverse(other.apply(VALUES)), VALUES,
                             rtol=2e-6, atol=1e-7)


def _sequence(seed):
  rng = np.random.default_rng(seed)
  discount_t = np.full((T, B), 0.99, np.float32)
  discount_t[2, 0] = discount_t[6, 1] = discount_t[T - 1, 2] = 0.0
  return dict(
      q_tm1=rng.normal(size=(T, B, A)).astype(np.float32),
      a_tm1=rng.integers(0, A, size=(T, B)).astype(np.int32),
      r_t=rng.normal(size=(T, B)).astype(np.float32),
      discount_t=discount_t,
      target_q_t=rng.normal(size=(T, B, A)).astype(np.float32),
      selector_q_t=rng.normal(size=(T, B, A)).astype(np.float32))


def reference_n_step_double_q(q_tm1, a_tm1, r_t, discount_t, target_q_t,
                              selector_q_t, n, h, h_inv):
  """R2D2 target, one sequence and one step at a time."""
  n_steps, n_seqs = r_t.shape
  td = np.zeros((n_steps, n_seqs))
  for b in range(n_seqs):
    for s in range(n_steps):
      m = min(n, n_steps - s)
      ret, gamma = 0.0, 1.0
      for k in range(m):
        ret += gamma * r_t[s + k, b]
        gamma *= discount_t[s + k, b]
      j = s + m - 1  # x_{s+m} = x_{j+1}
      a_star = np.argmax(selector_q_t[j, b])
      ret += gamma * h_inv(target_q_t[j, b, a_star])
      td[s, b] = h(ret) - q_tm1[s, b, a_tm1[s, b]]
  return td


@pytest.mark.parametrize('n', [1, 3, 5, 20])
def test_transformed_n_step_double_q_matches_reference(n):
  data = _sequence(n)
  out = losses.transformed_n_step_double_q_learning(**data, n=n)
  expected = reference_n_step_double_q(**data, n=n, h=h_ref, h_inv=h_inv_ref)
  np.testing.assert_allclose(out.td_error, expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(out.loss, 0.5 * expected ** 2, rtol=1e-4,
                             atol=1e-5)


def test_identity_transform_and_one_step_equals_double_q():
  data = _sequence(7)
  seq = losses.transformed_n_step_double_q_learning(
      **data, n=1, transform=losses.IDENTITY_TRANSFORM)
  flat = {k: v.reshape((T * B,) + v.shape[2:]) for k, v in data.items()}
  single = losses.double_q_learning(**flat)
  np.testing.assert_allclose(tf.reshape(seq.td_error, [-1]), single.td_error,
                             rtol=1e-6, atol=1e-6)
  expected = reference_n_step_double_q(**data, n=1, h=lambda x: x,
                                       h_inv=lambda x: x)
  np.testing.assert_allclose(seq.td_error, expected, rtol=1e-5, atol=1e-5)


def test_double_q_transformed_matches_reference():
  data = {k: v[0] for k, v in _sequence(8).items()}
  out = losses.double_q_learning(**data,
                                 transform=losses.SIGNED_HYPERBOLIC_TRANSFORM)
  for b in range(B):
    a_star = np.argmax(data['selector_q_t'][b])
    target = h_ref(data['r_t'][b] + data['discount_t'][b]
                   * h_inv_ref(data['target_q_t'][b, a_star]))
    np.testing.assert_allclose(
        out.td_error[b], target - data['q_tm1'][b, data['a_tm1'][b]],
        rtol=1e-5, atol=1e-5)


def test_n_step_returns_split_at_episode_boundary():
  rng = np.random.default_rng(9)
  r_t = rng.normal(size=(T, B)).astype(np.float32)
  v_t = rng.normal(size=(T, B)).astype(np.float32)
  discount_t = np.full((T, B), 0.9, np.float32)
  discount_t[3] = 0.0
  whole = losses.n_step_bootstrapped_returns(r_t, discount_t, v_t, n=3)
  parts = [losses.n_step_bootstrapped_returns(r_t[sl], discount_t[sl],
                                              v_t[sl], n=3)
           for sl in (slice(0, 4), slice(4, T))]
  np.testing.assert_allclose(np.concatenate(parts), whole, rtol=1e-6)


def test_r2d2_priority_matches_reference():
  td = np.random.default_rng(10).normal(size=(T, B)).astype(np.float32)
  got = losses.r2d2_priority(td, eta=0.9)
  for b in range(B):
    expected = (0.9 * max(abs(x) for x in td[:, b])
                + 0.1 * sum(abs(x) for x in td[:, b]) / T)
    np.testing.assert_allclose(got[b], expected, rtol=1e-6)


def test_gradients_only_reach_online_q_tm1():
  data = {k: tf.constant(v) for k, v in _sequence(11).items()}
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([v for k, v in data.items() if k != 'a_tm1'])
    out = losses.transformed_n_step_double_q_learning(**data, n=3)
    loss = tf.reduce_sum(out.loss)
  for name in ('r_t', 'discount_t', 'target_q_t', 'selector_q_t'):
    assert tape.gradient(loss, data[name]) is None, name
  grad = tape.gradient(loss, data['q_tm1']).numpy()
  taken = np.eye(A, dtype=bool)[data['a_tm1'].numpy()]
  assert not np.any(grad[~taken]) and np.any(grad[taken])
  # d(½δ²)/dQ(x,a) = -δ for the action taken.
  np.testing.assert_allclose(grad[taken], -out.td_error.numpy().ravel(),
                             rtol=1e-5)


def test_shape_errors_name_inputs():
  data = _sequence(12)
  data['target_q_t'] = data['target_q_t'][..., :-1]
  with pytest.raises(ValueError, match='target_q_t'):
    losses.transformed_n_step_double_q_learning(**data)
  data = _sequence(12)
  data['a_tm1'] = data['a_tm1'][:-1]
  with pytest.raises(ValueError, match='a_tm1'):
    losses.transformed_n_step_double_q_learning(**data)
  with pytest.raises(ValueError, match='eta'):
    losses.r2d2_priority(np.zeros((T, B)), eta=2.0)


def test_transforms_pickle():
  import pickle  # pylint: disable=g-import-not-at-top
  for tx in (losses.SIGNED_HYPERBOLIC_TRANSFORM, losses.IDENTITY_TRANSFORM):
    again = pickle.loads(pickle.dumps(tx))
    np.testing.assert_allclose(again.apply(VALUES), tx.apply(VALUES))
