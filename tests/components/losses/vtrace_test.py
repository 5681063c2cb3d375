"""V-trace against a sequential reference written in the paper's notation."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import losses

T, B, A = 7, 5, 3


def _random_unroll(seed, with_episode_ends=True):
  rng = np.random.default_rng(seed)
  data = dict(
      v_tm1=rng.normal(size=(T, B)).astype(np.float32),
      bootstrap_value=rng.normal(size=(B,)).astype(np.float32),
      r_t=rng.normal(size=(T, B)).astype(np.float32),
      discount_t=np.full((T, B), 0.9, np.float32),
      log_rhos=rng.normal(scale=0.8, size=(T, B)).astype(np.float32),
  )
  if with_episode_ends:
    # Episode ends inside the unroll (and one at the very last step).
    data['discount_t'][2, 0] = 0.0
    data['discount_t'][4, 1] = 0.0
    data['discount_t'][0, 2] = 0.0
    data['discount_t'][T - 1, 3] = 0.0
    data['discount_t'][3, 4] = 0.0
    data['discount_t'][5, 4] = 0.0
  return data


def reference_vtrace(v_tm1, bootstrap_value, r_t, discount_t, log_rhos,
                     lambda_=1.0, clip_rho=1.0, clip_pg_rho=1.0):
  """Equation (1) of Espeholt et al. 2018 as a plain sum, one actor at a time.

  v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} γ_i c_i) δ_t V,
  δ_t V = ρ_t (r_t + γ_t V(x_{t+1}) - V(x_t)).
  """
  v_tm1, bootstrap_value, r_t, discount_t, log_rhos = (
      np.asarray(x, np.float64) for x in
      (v_tm1, bootstrap_value, r_t, discount_t, log_rhos))
  n_steps, n_actors = v_tm1.shape
  vs = np.zeros((n_steps, n_actors))
  pg_adv = np.zeros((n_steps, n_actors))
  for b in range(n_actors):
    values = list(v_tm1[:, b]) + [bootstrap_value[b]]  # V(x_0) .. V(x_T)
    ratio = np.exp(log_rhos[:, b])
    rho = ratio if clip_rho is None else np.minimum(clip_rho, ratio)
    c = lambda_ * np.minimum(1.0, ratio)
    for s in range(n_steps):
      total = values[s]
      for t in range(s, n_steps):
        weight = 1.0
        for i in range(s, t):
          weight *= discount_t[i, b] * c[i]
        delta = rho[t] * (r_t[t, b] + discount_t[t, b] * values[t + 1]
                          - values[t])
        total += weight * delta
      vs[s, b] = total
    for s in range(n_steps):
      v_next = vs[s + 1, b] if s + 1 < n_steps else bootstrap_value[b]
      pg_rho = ratio[s] if clip_pg_rho is None else min(clip_pg_rho, ratio[s])
      pg_adv[s, b] = pg_rho * (r_t[s, b] + discount_t[s, b] * v_next
                               - values[s])
  return vs, pg_adv


@pytest.mark.parametrize('lambda_,clip_rho,clip_pg_rho', [
    (1.0, 1.0, 1.0), (0.9, 1.0, 1.0), (1.0, 2.0, 0.5), (0.7, None, None)])
def test_matches_sequential_reference(lambda_, clip_rho, clip_pg_rho):
  data = _random_unroll(seed=1)
  got = losses.vtrace(**data, lambda_=lambda_, clip_rho_threshold=clip_rho,
                      clip_pg_rho_threshold=clip_pg_rho)
  vs, pg_adv = reference_vtrace(**data, lambda_=lambda_, clip_rho=clip_rho,
                                clip_pg_rho=clip_pg_rho)
  assert isinstance(got, losses.VTraceReturns)
  np.testing.assert_allclose(got.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got.pg_advantages.numpy(), pg_adv, rtol=1e-5,
                             atol=1e-5)


def plain_gae(v_tm1, bootstrap_value, r_t, discount_t, lambda_):
  """GAE(λ) of Schulman et al. 2016 as the paper's sum, one actor at a time:
  A_s = sum_{k>=0} (prod_{j<k} γ_{s+j} λ) δ_{s+k},
  δ_t = r_t + γ_t V(x_{t+1}) - V(x_t); a discount of 0 ends the sum."""
  n_steps, n_actors = v_tm1.shape
  advantages = np.zeros((n_steps, n_actors))
  for b in range(n_actors):
    values = list(v_tm1[:, b]) + [bootstrap_value[b]]
    deltas = [r_t[t, b] + discount_t[t, b] * values[t + 1] - values[t]
              for t in range(n_steps)]
    for s in range(n_steps):
      weight = 1.0
      for t in range(s, n_steps):
        advantages[s, b] += weight * deltas[t]
        weight *= discount_t[t, b] * lambda_
  return advantages


@pytest.mark.parametrize('lambda_', [0.0, 0.8, 0.95])
def test_gae_advantage_on_policy_is_gae(lambda_):
  data = _random_unroll(seed=6)
  data['log_rhos'] = np.zeros((T, B), np.float32)  # On-policy: ρ = 1.
  got = losses.vtrace(**data, lambda_=lambda_, pg_advantage='gae')
  expected = plain_gae(data['v_tm1'], data['bootstrap_value'], data['r_t'],
                       data['discount_t'], lambda_)
  np.testing.assert_allclose(got.pg_advantages.numpy(), expected, rtol=1e-5,
                             atol=1e-5)
  # The paper's form weighs the TD errors otherwise (γ^k λ^(k-1)).
  paper = losses.vtrace(**data, lambda_=lambda_)
  assert not np.allclose(paper.pg_advantages.numpy(), expected, atol=1e-3)
  np.testing.assert_allclose(got.vs.numpy(), paper.vs.numpy())


@pytest.mark.parametrize('lambda_,clip_pg_rho', [(0.9, 1.0), (0.7, None)])
def test_gae_advantage_off_policy_matches_its_definition(lambda_,
                                                         clip_pg_rho):
  data = _random_unroll(seed=7)
  got = losses.vtrace(**data, lambda_=lambda_, pg_advantage='gae',
                      clip_pg_rho_threshold=clip_pg_rho)
  vs, _ = reference_vtrace(**data, lambda_=lambda_, clip_pg_rho=clip_pg_rho)
  # ρ̄_s (r_s + γ_s ((1 - λ) V(x_{s+1}) + λ v_{s+1}) - V(x_s)).
  values = np.concatenate([data['v_tm1'], data['bootstrap_value'][None]])
  targets = np.concatenate([vs, data['bootstrap_value'][None]])
  ratio = np.exp(data['log_rhos'].astype(np.float64))
  rho = ratio if clip_pg_rho is None else np.minimum(clip_pg_rho, ratio)
  expected = rho * (data['r_t'] + data['discount_t'] * (
      (1 - lambda_) * values[1:] + lambda_ * targets[1:]) - values[:-1])
  np.testing.assert_allclose(got.pg_advantages.numpy(), expected, rtol=1e-5,
                             atol=1e-5)


def test_gae_advantage_with_lambda_one_is_the_papers():
  data = _random_unroll(seed=8)
  gae = losses.vtrace(**data, pg_advantage='gae')
  paper = losses.vtrace(**data)
  np.testing.assert_allclose(gae.pg_advantages.numpy(),
                             paper.pg_advantages.numpy(), rtol=1e-6,
                             atol=1e-6)


def test_unknown_pg_advantage_names_the_choices():
  with pytest.raises(ValueError, match=r"pg_advantage='gea'; choose one of "
                     r"\('vtrace', 'gae'\)"):
    losses.vtrace(**_random_unroll(seed=9), pg_advantage='gea')


def test_inside_tf_function_matches_eager():
  data = _random_unroll(seed=2)
  eager = losses.vtrace(**data)
  graph = tf.function(losses.vtrace)(**data)
  np.testing.assert_allclose(graph.vs.numpy(), eager.vs.numpy(), rtol=1e-6)


def test_on_policy_unclipped_equals_n_step_bootstrapped_returns():
  data = _random_unroll(seed=3)
  data['log_rhos'] = np.zeros((T, B), np.float32)  # ρ = c = 1.
  got = losses.vtrace(**data, lambda_=1.0)
  # G_s = sum_{k=s}^{T-1} (prod_{j=s}^{k-1} γ_j) r_k
  #       + (prod_{j=s}^{T-1} γ_j) V(x_T).
  expected = np.zeros((T, B))
  for b in range(B):
    for s in range(T):
      ret, weight = 0.0, 1.0
      for k in range(s, T):
        ret += weight * data['r_t'][k, b]
        weight *= data['discount_t'][k, b]
      expected[s, b] = ret + weight * data['bootstrap_value'][b]
  np.testing.assert_allclose(got.vs.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_splitting_at_episode_boundary_gives_same_targets():
  data = _random_unroll(seed=4, with_episode_ends=False)
  k = 3
  data['discount_t'][k, :] = 0.0  # Every episode ends after step k.
  whole = losses.vtrace(**data)
  first = {key: value[:k + 1] for key, value in data.items()
           if key != 'bootstrap_value'}
  # The bootstrap of the first part is multiplied by discount 0; any value.
  first['bootstrap_value'] = np.full((B,), 123.0, np.float32)
  second = {key: value[k + 1:] for key, value in data.items()
            if key != 'bootstrap_value'}
  second['bootstrap_value'] = data['bootstrap_value']
  part1, part2 = losses.vtrace(**first), losses.vtrace(**second)
  np.testing.assert_allclose(
      np.concatenate([part1.vs, part2.vs]), whole.vs, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(
      np.concatenate([part1.pg_advantages, part2.pg_advantages]),
      whole.pg_advantages, rtol=1e-6, atol=1e-6)


def test_shape_mismatch_names_the_inputs():
  data = _random_unroll(seed=5)
  data['r_t'] = data['r_t'][:-1]
  with pytest.raises(ValueError, match='r_t'):
    losses.vtrace(**data)
  data = _random_unroll(seed=5)
  data['bootstrap_value'] = np.zeros((B + 1,), np.float32)
  with pytest.raises(ValueError, match='bootstrap_value'):
    losses.vtrace(**data)
  with pytest.raises(ValueError, match='clip_rho_threshold'):
    losses.vtrace(**_random_unroll(seed=5), clip_rho_threshold=-1.0)


def _impala_inputs(seed):
  rng = np.random.default_rng(seed)
  data = _random_unroll(seed)
  del data['log_rhos']
  target_logits = rng.normal(size=(T, B, A)).astype(np.float32)
  behaviour_logits = rng.normal(size=(T, B, A)).astype(np.float32)
  actions = rng.integers(0, A, size=(T, B)).astype(np.int32)
  return data, target_logits, behaviour_logits, actions


def _log_softmax(x):
  x = np.asarray(x, np.float64)
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_impala_loss_matches_reference():
  data, target_logits, behaviour_logits, actions = _impala_inputs(seed=6)
  log_pi = _log_softmax(target_logits)
  log_mu = _log_softmax(behaviour_logits)
  take = lambda lp: np.take_along_axis(lp, actions[..., None], -1)[..., 0]
  log_pi_a, log_mu_a = take(log_pi), take(log_mu)
  vs, pg_adv = reference_vtrace(log_rhos=log_pi_a - log_mu_a, **data)
  entropy = -(np.exp(log_pi) * log_pi).sum(-1)
  policy_loss = -(pg_adv * log_pi_a).mean()
  baseline_loss = 0.5 * ((vs - data['v_tm1']) ** 2).mean()
  expected = policy_loss + 0.5 * baseline_loss - 0.01 * entropy.mean()

  out = losses.impala_loss(
      target_logits, actions,
      losses.categorical_log_prob(behaviour_logits, actions), **data,
      baseline_cost=0.5, entropy_cost=0.01)
  assert isinstance(out, losses.LossOutput)
  np.testing.assert_allclose(out.loss.numpy(), expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.extra['policy_loss'], policy_loss, rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(out.extra['baseline_loss'], baseline_loss,
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.extra['entropy'], entropy.mean(), rtol=1e-5)


def test_impala_gradients_reach_only_learner_side_inputs():
  data, target_logits, behaviour_logits, actions = _impala_inputs(seed=7)
  tensors = {k: tf.constant(v) for k, v in data.items()}
  target_logits = tf.constant(target_logits)
  behaviour_log_prob = tf.constant(
      losses.categorical_log_prob(behaviour_logits, actions))
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(list(tensors.values()) + [target_logits, behaviour_log_prob])
    out = losses.impala_loss(target_logits, actions, behaviour_log_prob,
                             **tensors)
  for name in ('bootstrap_value', 'r_t', 'discount_t'):
    grad = tape.gradient(out.loss, tensors[name])
    assert grad is None or not np.any(grad.numpy()), name
  grad = tape.gradient(out.loss, behaviour_log_prob)
  assert grad is None or not np.any(grad.numpy())
  # The value loss pulls V(x_s) towards the constant target v_s only:
  # d/dV 0.5 * baseline_cost * mean((v_s - V)^2) = -baseline_cost (v_s - V)/N.
  vs = losses.vtrace(
      log_rhos=losses.categorical_log_prob(target_logits, actions)
      - behaviour_log_prob, **tensors).vs
  np.testing.assert_allclose(
      tape.gradient(out.loss, tensors['v_tm1']),
      -0.5 * (vs - tensors['v_tm1']) / (T * B), rtol=1e-4, atol=1e-7)
  assert np.any(tape.gradient(out.loss, target_logits).numpy())
  # Through vtrace alone no input gets a gradient: its outputs are targets.
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(list(tensors.values()))
    log_rhos = tf.zeros((T, B))
    tape.watch(log_rhos)
    returns = losses.vtrace(log_rhos=log_rhos, **tensors)
    total = tf.reduce_sum(returns.vs) + tf.reduce_sum(returns.pg_advantages)
  for x in list(tensors.values()) + [log_rhos]:
    assert tape.gradient(total, x) is None


def test_unknown_dims_inside_tf_function():
  spec = tf.TensorSpec([None, None], tf.float32)

  @tf.function(input_signature=[spec, tf.TensorSpec([None], tf.float32),
                                spec, spec, spec])
  def run(v_tm1, bootstrap_value, r_t, discount_t, log_rhos):
    return losses.vtrace(v_tm1, bootstrap_value, r_t, discount_t, log_rhos)

  data = _random_unroll(seed=8)
  got = run(**data)
  vs, _ = reference_vtrace(**data)
  np.testing.assert_allclose(got.vs, vs, rtol=1e-5, atol=1e-5)


def test_normalized_advantages_policy_loss_matches_reference():
  # PPO's normalisation of ρ̄_s A_s over the real (mask 1) transitions only.
  data, target_logits, behaviour_logits, actions = _impala_inputs(seed=8)
  mask = np.ones_like(data['r_t'])
  mask[-2:, 0] = 0.0  # Two padded transitions.
  log_pi = _log_softmax(target_logits)
  take = lambda lp: np.take_along_axis(lp, actions[..., None], -1)[..., 0]
  log_pi_a = take(log_pi)
  _, pg_adv = reference_vtrace(
      log_rhos=log_pi_a - take(_log_softmax(behaviour_logits)), **data)
  real = pg_adv[mask > 0]
  normalized = mask * (pg_adv - real.mean()) / (real.std() + 1e-8)
  out = losses.impala_loss(
      target_logits, actions,
      losses.categorical_log_prob(behaviour_logits, actions), **data,
      normalize_advantages=True, mask=mask)
  np.testing.assert_allclose(out.extra['policy_loss'],
                             -(normalized * log_pi_a).mean(), rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(
      losses.normalized_advantages(pg_adv, mask).numpy(), normalized,
      rtol=1e-4, atol=1e-5)
  plain = losses.impala_loss(
      target_logits, actions,
      losses.categorical_log_prob(behaviour_logits, actions), **data)
  np.testing.assert_allclose(out.extra['baseline_loss'],
                             plain.extra['baseline_loss'])  # Untouched.


def _appo_reference(data, target_logits, behaviour_logits, actions, epsilon,
                    mask):
  """APPO's policy term in NumPy: -mean(min(ρ Â, clip(ρ, 1±ε) Â)) with
  ρ = π/μ and Â the V-trace ρ̄-weighted advantage; its gradient with
  respect to the target logits (d log π_a / d logits = onehot(a) - π), and
  the share of real transitions with |ρ - 1| > ε."""
  log_pi = _log_softmax(target_logits)
  take = lambda lp: np.take_along_axis(lp, actions[..., None], -1)[..., 0]
  log_rho = take(log_pi) - take(_log_softmax(behaviour_logits))
  _, adv = reference_vtrace(log_rhos=log_rho, **data)
  rho = np.exp(log_rho)
  unclipped = rho * adv
  clipped = np.clip(rho, 1 - epsilon, 1 + epsilon) * adv
  loss = -np.minimum(unclipped, clipped).mean()
  active = unclipped <= clipped  # The term that carries the gradient.
  weight = np.where(active, unclipped, 0.0) / unclipped.size   # [T, B]
  onehot = np.eye(A)[actions]
  grad = -weight[..., None] * (onehot - np.exp(log_pi))        # [T, B, A]
  fraction = (mask * (np.abs(rho - 1) > epsilon)).sum() / mask.sum()
  return loss, grad, fraction


@pytest.mark.parametrize('epsilon', [0.1, 0.2, 0.5])
def test_ppo_clip_policy_loss_and_gradient_match_reference(epsilon):
  data, target_logits, behaviour_logits, actions = _impala_inputs(seed=9)
  mask = np.ones_like(data['r_t'])
  mask[-1, 1] = 0.0
  loss, grad, fraction = _appo_reference(data, target_logits,
                                         behaviour_logits, actions, epsilon,
                                         mask)
  logits = tf.constant(target_logits)
  with tf.GradientTape() as tape:
    tape.watch(logits)
    out = losses.appo_loss(
        logits, actions,
        losses.categorical_log_prob(behaviour_logits, actions), **data,
        ppo_clip=epsilon, mask=mask, entropy_cost=0.0, baseline_cost=0.0)
  np.testing.assert_allclose(out.extra['policy_loss'], loss, rtol=1e-4,
                             atol=1e-6)
  np.testing.assert_allclose(tape.gradient(out.loss, logits), grad,
                             rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(out.extra['clip_fraction'], fraction, rtol=1e-6)
  assert 0.0 < fraction < 1.0  # Both branches of the min are exercised.
  plain = losses.impala_loss(
      target_logits, actions,
      losses.categorical_log_prob(behaviour_logits, actions), **data)
  assert abs(float(plain.extra['policy_loss']) - loss) > 1e-3
  np.testing.assert_allclose(out.extra['mean_vs'], plain.extra['mean_vs'])
  assert float(plain.extra['clip_fraction']) == 0.0


def test_ppo_clip_must_be_positive():
  data, target_logits, behaviour_logits, actions = _impala_inputs(seed=1)
  with pytest.raises(ValueError, match='ppo_clip must be None .* got 0'):
    losses.appo_loss(target_logits, actions,
                     losses.categorical_log_prob(behaviour_logits, actions),
                     **data, ppo_clip=0.0)
