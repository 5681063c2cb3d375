"""NeuRD's, MMD's and A2C's losses against a plain per-step reference
written from the papers (Hennes et al. 2020; Sokota et al. 2022), MMD with
a uniform or a given magnet."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from repertory.agents import neurd
from repertory.agents.neurd import loss as loss_lib

T, B, A = 4, 3, 3
GAMMA = 0.9


def _batch(seed):
  rng = np.random.default_rng(seed)
  logits = rng.normal(size=(T, B, A)) * 3
  logits[0, 0, 1] = 21.0  # Beyond the NeuRD clip of 10 from the mean.
  q = rng.normal(size=(T, B, A))
  legal = (rng.uniform(size=(T, B, A)) < 0.7).astype(np.float32)
  legal[..., 0] = 1.0
  action = np.zeros((T, B), np.int64)
  for t in range(T):
    for b in range(B):
      action[t, b] = rng.choice(np.flatnonzero(legal[t, b]))
  reward = rng.normal(size=(T, B))
  discount = np.ones((T, B))
  step_type = np.array([[0, 0, 0], [1, 2, 1], [2, 2, 1], [2, 2, 2]])
  discount[step_type == 2] = 0.0
  discount[1, 0] = 0.0  # Episode 0 ends after step 1 (step 2 is LAST).
  discount[0, 1] = 0.0
  discount[2, 2] = 0.0
  return logits, q, legal, action, reward, discount, step_type


def _log_softmax_legal(z, legal):
  z = np.where(legal > 0, z, -np.inf)
  m = z.max()
  return z - m - np.log(np.exp(z - m).sum())


def _returns(reward, discount, step_type):
  """G_t = r_t + γ d_t G_{t+1} (no bootstrap), and the mask of real steps."""
  returns = np.zeros((T, B))
  for b in range(B):
    g = 0.0
    for t in reversed(range(T)):
      g = reward[t, b] + GAMMA * discount[t, b] * g
      returns[t, b] = g
  return returns, (step_type != 2).astype(np.float32)


def _reference(logits, q, legal, action, reward, discount, step_type, config,
               magnet=None):
  """Plain loops, written from the papers' per-information-state updates."""
  total = critic_sum = policy_sum = entropy_sum = 0.0
  grad = np.zeros_like(logits)
  valid = [(t, b) for t in range(T) for b in range(B) if step_type[t, b] != 2]
  for t, b in valid:
    g, k = 0.0, 1.0
    for s in range(t, T):  # G_t = Σ_s γ^(s-t) Π d r_s
      g += k * reward[s, b]
      k *= GAMMA * discount[s, b]
    z = np.where(legal[t, b] > 0, logits[t, b], -1e9)
    pi = np.exp(z - z.max())
    pi /= pi.sum()
    v = float(pi @ q[t, b])
    critic = 0.5 * (g - q[t, b, action[t, b]]) ** 2
    if config.policy_loss in ('neurd', 'mmd'):
      q_reg = q[t, b].copy()
      if config.policy_loss == 'mmd':  # Q - α log(π / ρ), ρ uniform or given.
        log_pi = _log_softmax_legal(logits[t, b], legal[t, b])
        log_rho = _log_softmax_legal(
            np.zeros(A) if magnet is None else magnet[t, b], legal[t, b])
        for a in range(A):
          if legal[t, b, a]:
            q_reg[a] -= config.magnet_strength * (log_pi[a] - log_rho[a])
      v_reg = sum(pi[a] * q_reg[a] for a in range(A) if legal[t, b, a])
      legal_as = [a for a in range(A) if legal[t, b, a]]
      y_mean = sum(logits[t, b, a] for a in legal_as) / len(legal_as)
      policy, force = 0.0, {}
      for a in legal_as:  # Pushes on y_a - ȳ, none outward past the clip.
        adv = q_reg[a] - v_reg
        y = logits[t, b, a] - y_mean
        force[a] = adv * ((y < 10.0) if adv > 0 else (y > -10.0))
        policy -= force[a] * y
      mean_force = sum(force.values()) / len(legal_as)
      for a in legal_as:
        grad[t, b, a] = -(force[a] - mean_force) / len(valid)
    else:
      policy = -np.log(pi[action[t, b]]) * (g - v)
    entropy = -sum(p * np.log(p) for p in pi if p > 0)
    total += policy + config.baseline_cost * critic - config.entropy_cost * entropy
    critic_sum += critic
    policy_sum += policy
    entropy_sum += entropy
  n = len(valid)
  return total / n, critic_sum / n, policy_sum / n, entropy_sum / n, grad


def _loss(config, logits, batch, magnet=None):
  """The loss function of `config.policy_loss` on `_batch`'s arrays."""
  _, q, legal, action, reward, discount, step_type = batch
  returns, mask = _returns(reward, discount, step_type)
  args = (logits, tf.constant(q, tf.float32), tf.constant(legal),
          tf.constant(action), tf.constant(returns), tf.constant(mask))
  common = dict(baseline_cost=config.baseline_cost,
                entropy_cost=config.entropy_cost)
  if config.policy_loss == 'neurd':
    return loss_lib.neurd_loss(*args, clip=10.0, **common)
  if config.policy_loss == 'mmd':
    return loss_lib.mmd_loss(
        *args, magnet_strength=config.magnet_strength, clip=10.0,
        magnet_logits_t=None if magnet is None else tf.constant(magnet),
        **common)
  return loss_lib.a2c_loss(*args, **common)


@pytest.mark.parametrize('policy_loss, magnet', [
    ('neurd', None), ('a2c', None), ('mmd', None), ('mmd', 'network')])
@pytest.mark.parametrize('seed', [0, 1])
def test_loss_matches_the_reference(policy_loss, magnet, seed):
  config = neurd.Config(policy_loss=policy_loss, entropy_cost=0.05,
                        magnet_strength=0.3)
  batch = _batch(seed)
  if magnet is not None:
    magnet = np.random.default_rng(seed + 10).normal(size=(T, B, A)) * 2
  logits = tf.Variable(batch[0], dtype=tf.float32)
  with tf.GradientTape() as tape:
    out = _loss(config, logits, batch, magnet)
    policy = out.extra['policy_loss']
  total, critic, policy_ref, entropy, grad = _reference(*batch, config,
                                                        magnet)
  np.testing.assert_allclose(out.loss, total, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(out.extra['critic_loss'], critic, rtol=1e-4,
                             atol=1e-5)
  np.testing.assert_allclose(policy, policy_ref, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(out.extra['entropy'], entropy, rtol=1e-4,
                             atol=1e-5)
  if policy_loss in ('neurd', 'mmd'):
    # The policy term's gradient on the logits: -A(a) for every legal action
    # (none outward past the clip), less its mean over the legal actions,
    # over the number of valid steps.
    np.testing.assert_allclose(tape.gradient(policy, logits), grad,
                               rtol=1e-4, atol=1e-6)


def test_mmd_with_a_uniform_magnet_and_no_strength_is_neurd():
  batch = _batch(0)
  logits = tf.constant(batch[0], tf.float32)
  neurd_out = _loss(neurd.Config(policy_loss='neurd'), logits, batch)
  mmd_out = _loss(neurd.Config(policy_loss='mmd', magnet_strength=0.0),
                  logits, batch)
  np.testing.assert_allclose(mmd_out.loss, neurd_out.loss, rtol=1e-6)


def test_mmd_fixed_point_is_the_magnets_logit_response():
  """At π ∝ ρ exp(Q / α) the MMD policy gradient vanishes on every logit
  (and at π = ρ it does not, when Q differs across actions)."""
  alpha = 0.5
  q = np.array([[[1.0, -0.5, 0.25]]])
  magnet = np.array([[[0.3, -1.0, 0.0]]])
  args = (tf.constant(q, tf.float32), tf.ones((1, 1, 3)), tf.constant([[0]]),
          tf.constant([[0.0]]), tf.constant([[1.0]]))

  def gradient(logits):
    logits = tf.Variable(logits, dtype=tf.float32)
    with tf.GradientTape() as tape:
      out = loss_lib.mmd_loss(logits, *args, magnet_strength=alpha,
                              magnet_logits_t=tf.constant(magnet, tf.float32))
    return tape.gradient(out.extra['policy_loss'], logits).numpy()

  np.testing.assert_allclose(gradient(magnet + q / alpha), 0.0, atol=1e-5)
  assert np.abs(gradient(magnet)).max() > 0.1


def test_losses_check_their_shapes():
  logits = tf.zeros((T, B, A))
  with pytest.raises(ValueError, match=r'neurd_loss: .*q_t'):
    loss_lib.neurd_loss(logits, tf.zeros((T, B, A + 1)), tf.ones((T, B, A)),
                        tf.zeros((T, B), tf.int32), tf.zeros((T, B)),
                        tf.ones((T, B)))
  with pytest.raises(ValueError, match=r'a2c_loss: returns_t has shape'):
    loss_lib.a2c_loss(logits, logits, tf.ones((T, B, A)),
                      tf.zeros((T, B), tf.int32), tf.zeros((T + 1, B)),
                      tf.ones((T + 1, B)))


def test_config_rejects_bad_values():
  with pytest.raises(ValueError, match=r"policy_loss='reinforce'; choose one "
                     'of neurd, mmd, a2c'):
    neurd.Config(policy_loss='reinforce')
  with pytest.raises(ValueError, match='magnet_strength=-0.1 must be >= 0'):
    neurd.Config(magnet_strength=-0.1)
  with pytest.raises(ValueError, match='batch_size'):
    neurd.Config(batch_size=0)
  with pytest.raises(ValueError, match=r'exploration must be in \[0, 1\)'):
    neurd.Config(exploration=1.0)


@pytest.mark.parametrize('policy_loss', ['neurd', 'mmd'])
def test_the_clip_holds_logits_from_their_mean(policy_loss):
  """Softmax ignores a common offset of the logits, and so do the pushes:
  the clip bounds y_a - ȳ, wherever the raw logits are."""
  q = tf.constant([[[1.0, 0.0]]])
  args = (q, tf.ones((1, 1, 2)), tf.constant([[0]]), tf.constant([[0.0]]),
          tf.constant([[1.0]]))
  fn = (loss_lib.neurd_loss if policy_loss == 'neurd' else
        functools.partial(loss_lib.mmd_loss, magnet_strength=0.1))

  def gradient(logits):
    logits = tf.Variable([[logits]], dtype=tf.float32)
    with tf.GradientTape() as tape:
      out = fn(logits, *args, clip=3.0)
    return tape.gradient(out.extra['policy_loss'], logits).numpy()[0, 0]

  inside = gradient([2.0, -2.0])
  assert inside[0] < 0 < inside[1]  # Towards the better action 0.
  np.testing.assert_allclose(inside.sum(), 0.0, atol=1e-6)
  np.testing.assert_allclose(gradient([-18.0, -22.0]), inside, rtol=1e-5)
  # 3.5 from their mean: no push further out, wherever they are.
  np.testing.assert_allclose(gradient([3.5, -3.5]), 0.0, atol=1e-6)
  np.testing.assert_allclose(gradient([-6.5, -13.5]), 0.0, atol=1e-6)
