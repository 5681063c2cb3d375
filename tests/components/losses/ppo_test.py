"""GAE and the PPO loss against sequential references in the papers' notation."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import losses

T, B = 6, 4


def _unroll(seed):
  rng = np.random.default_rng(seed)
  discount_t = np.full((T, B), 0.97, np.float32)
  discount_t[1, 0] = discount_t[4, 2] = discount_t[T - 1, 3] = 0.0
  return dict(
      v_tm1=rng.normal(size=(T, B)).astype(np.float32),
      bootstrap_value=rng.normal(size=(B,)).astype(np.float32),
      r_t=rng.normal(size=(T, B)).astype(np.float32),
      discount_t=discount_t)


def reference_gae(v_tm1, bootstrap_value, r_t, discount_t, lambda_):
  """Â_s = Σ_{l=0}^{T-s-1} (Π_{j=s}^{s+l-1} γ_j λ) δ_{s+l} (eq. 16)."""
  n_steps, n_seqs = v_tm1.shape
  adv = np.zeros((n_steps, n_seqs))
  for b in range(n_seqs):
    values = list(np.float64(v_tm1[:, b])) + [float(bootstrap_value[b])]
    delta = [r_t[s, b] + discount_t[s, b] * values[s + 1] - values[s]
             for s in range(n_steps)]
    for s in range(n_steps):
      weight = 1.0
      for l in range(n_steps - s):
        adv[s, b] += weight * delta[s + l]
        weight *= discount_t[s + l, b] * lambda_
  return adv, adv + v_tm1


@pytest.mark.parametrize('lambda_', [0.0, 0.95, 1.0])
def test_gae_matches_reference(lambda_):
  data = _unroll(0)
  got = losses.generalized_advantage_estimation(**data, lambda_=lambda_)
  adv, ret = reference_gae(**data, lambda_=lambda_)
  np.testing.assert_allclose(got.advantages, adv, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got.returns, ret, rtol=1e-5, atol=1e-5)


def test_gae_lambda_one_is_discounted_return_minus_value():
  data = _unroll(1)
  got = losses.generalized_advantage_estimation(**data, lambda_=1.0)
  returns = losses.discounted_returns(
      data['r_t'], data['discount_t'], data['bootstrap_value'])
  np.testing.assert_allclose(got.advantages, returns - data['v_tm1'],
                             rtol=1e-5, atol=1e-5)


def test_gae_split_at_episode_boundary():
  data = _unroll(2)
  data['discount_t'][:] = 0.9
  data['discount_t'][2] = 0.0
  whole = losses.generalized_advantage_estimation(**data)
  first = {k: v[:3] for k, v in data.items() if k != 'bootstrap_value'}
  first['bootstrap_value'] = np.full((B,), -7.0, np.float32)
  second = {k: v[3:] for k, v in data.items() if k != 'bootstrap_value'}
  second['bootstrap_value'] = data['bootstrap_value']
  parts = [losses.generalized_advantage_estimation(**p).advantages
           for p in (first, second)]
  np.testing.assert_allclose(np.concatenate(parts), whole.advantages,
                             rtol=1e-6, atol=1e-6)


def _ppo_inputs(seed, n=40, spread=0.5):
  rng = np.random.default_rng(seed)
  f = lambda *s, scale=1.0: (rng.normal(size=s) * scale).astype(np.float32)
  old_log_prob = f(n) - 1.0
  v_tm1 = f(n)
  return dict(
      log_prob=old_log_prob + f(n, scale=spread),
      old_log_prob=old_log_prob,
      advantages=f(n),
      v_tm1=v_tm1,
      old_v_tm1=v_tm1 + f(n, scale=spread),
      returns=f(n),
      entropy=np.abs(f(n)))


def reference_ppo(log_prob, old_log_prob, advantages, v_tm1, old_v_tm1,
                  returns, entropy, clip_epsilon, value_clip_epsilon,
                  value_cost, entropy_cost, normalize_advantages):
  """L^CLIP, L^VF (clipped) and entropy, one sample at a time (eq. 7, 9)."""
  adv = np.float64(advantages)
  if normalize_advantages:
    adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
  n = len(adv)
  policy, value = 0.0, 0.0
  for i in range(n):
    ratio = np.exp(np.float64(log_prob[i]) - old_log_prob[i])
    clipped = min(max(ratio, 1 - clip_epsilon), 1 + clip_epsilon)
    policy += min(ratio * adv[i], clipped * adv[i]) / n
    err = (v_tm1[i] - returns[i]) ** 2
    if value_clip_epsilon is not None:
      v_clip = old_v_tm1[i] + min(max(v_tm1[i] - old_v_tm1[i],
                                      -value_clip_epsilon),
                                  value_clip_epsilon)
      err = max(err, (v_clip - returns[i]) ** 2)
    value += 0.5 * err / n
  return -policy + value_cost * value - entropy_cost * np.mean(entropy)


@pytest.mark.parametrize('value_clip,normalize', [
    (0.2, True), (None, False), (0.1, False)])
def test_ppo_loss_matches_reference(value_clip, normalize):
  data = _ppo_inputs(3)
  kwargs = dict(clip_epsilon=0.2, value_clip_epsilon=value_clip,
                value_cost=0.5, entropy_cost=0.01,
                normalize_advantages=normalize)
  got = losses.ppo_loss(**data, **kwargs)
  expected = reference_ppo(**data, **kwargs)
  np.testing.assert_allclose(got.loss, expected, rtol=1e-5, atol=1e-6)
  assert set(got.extra) >= {'policy_loss', 'value_loss', 'entropy',
                            'approx_kl', 'clip_fraction'}
  assert 0.0 < got.extra['clip_fraction'] < 1.0  # Some ratios are clipped.


def test_ppo_inside_clip_range_is_the_plain_policy_gradient():
  data = _ppo_inputs(4, spread=0.01)  # ratios within [0.97, 1.03]
  log_prob = tf.constant(data['log_prob'])
  old = data['old_log_prob']
  adv = data['advantages']
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(log_prob)
    out = losses.ppo_loss(log_prob, old, adv, data['v_tm1'],
                          data['old_v_tm1'], data['returns'],
                          data['entropy'], clip_epsilon=0.2,
                          normalize_advantages=False)
    plain_pg = -tf.reduce_mean(tf.exp(log_prob - old) * adv)
  np.testing.assert_allclose(out.extra['policy_loss'], plain_pg, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(out.loss, log_prob),
                             tape.gradient(plain_pg, log_prob), rtol=1e-5)
  assert out.extra['clip_fraction'] == 0.0
  # On-policy (ratio 1) the gradient is the REINFORCE one, -Â ∇log π / N.
  with tf.GradientTape() as tape:
    tape.watch(log_prob)
    objective = losses.clipped_surrogate_objective(log_prob, log_prob, adv)
    loss = -tf.reduce_mean(objective)
  np.testing.assert_allclose(tape.gradient(loss, log_prob),
                             -adv / len(adv), rtol=1e-5)


def test_ppo_gradients_skip_old_and_target_inputs():
  data = {k: tf.constant(v) for k, v in _ppo_inputs(5).items()}
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(list(data.values()))
    out = losses.ppo_loss(**data)
  for name in ('old_log_prob', 'advantages', 'returns', 'old_v_tm1'):
    grad = tape.gradient(out.loss, data[name])
    assert grad is None or not np.any(grad.numpy()), name
  for name in ('log_prob', 'v_tm1', 'entropy'):
    assert np.any(tape.gradient(out.loss, data[name]).numpy()), name


def test_ppo_shape_mismatch_names_inputs():
  data = _ppo_inputs(6)
  data['returns'] = data['returns'][:-1]
  with pytest.raises(ValueError, match='returns'):
    losses.ppo_loss(**data)
  with pytest.raises(ValueError, match='lambda_'):
    losses.generalized_advantage_estimation(**_unroll(0), lambda_=1.5)
  with pytest.raises(ValueError, match='clip_epsilon must be >= 0'):
    losses.ppo_loss(**_ppo_inputs(6), clip_epsilon=-0.1)
  with pytest.raises(ValueError, match='must be a scalar'):
    losses.ppo_loss(**_ppo_inputs(6), clip_epsilon=tf.constant([0.1, 0.2]))


def sb3_ppo_loss(log_prob, old_log_prob, advantages, v_tm1, returns,
                 clip_range, vf_coef):
  """Stable-Baselines3's PPO.train() minibatch loss (no value clip, no
  entropy), written from its code: torch .std() is the sample std."""
  adv = np.float64(advantages)
  adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
  ratio = np.exp(np.float64(log_prob) - old_log_prob)
  policy_loss = -np.mean(np.minimum(
      adv * ratio, adv * np.clip(ratio, 1 - clip_range, 1 + clip_range)))
  value_loss = np.mean((np.float64(returns) - v_tm1) ** 2)  # F.mse_loss
  return policy_loss + vf_coef * value_loss


def test_ppo_loss_reproduces_sb3_with_its_documented_mapping():
  data = _ppo_inputs(7)
  got = losses.ppo_loss(**data, clip_epsilon=0.15, value_clip_epsilon=None,
                        value_cost=1.0, entropy_cost=0.0)
  expected = sb3_ppo_loss(data['log_prob'], data['old_log_prob'],
                          data['advantages'], data['v_tm1'], data['returns'],
                          clip_range=0.15, vf_coef=0.5)
  np.testing.assert_allclose(got.loss, expected, rtol=1e-5, atol=1e-6)


def test_annealed_clip_variable_takes_effect_without_retracing():
  data = {k: tf.constant(v) for k, v in _ppo_inputs(8).items()}
  clip = tf.Variable(0.2, trainable=False)
  traces = []

  @tf.function
  def loss_fn():
    traces.append(1)
    return losses.ppo_loss(**data, clip_epsilon=clip,
                           value_clip_epsilon=None).loss

  kwargs = dict(value_clip_epsilon=None, value_cost=0.5, entropy_cost=0.01,
                normalize_advantages=True)
  for value in (0.2, 0.05, 0.0):  # A linear schedule's last value is 0.
    clip.assign(value)
    expected = reference_ppo(**_ppo_inputs(8), clip_epsilon=value, **kwargs)
    np.testing.assert_allclose(loss_fn(), expected, rtol=1e-5, atol=1e-6)
  assert len(traces) == 1


def test_single_element_advantage_is_not_normalised():
  data = {k: v[:1] for k, v in _ppo_inputs(9).items()}
  got = losses.ppo_loss(**data, value_clip_epsilon=None, value_cost=0.0,
                        entropy_cost=0.0, normalize_advantages=True)
  plain = losses.ppo_loss(**data, value_clip_epsilon=None, value_cost=0.0,
                          entropy_cost=0.0, normalize_advantages=False)
  np.testing.assert_allclose(got.loss, plain.loss, rtol=1e-6)
  assert float(got.loss) != 0.0
