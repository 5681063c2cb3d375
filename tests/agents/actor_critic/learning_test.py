"""The V-trace learner's `reward_scale`, `normalize_advantages` and
`ppo_clip` against plain n-step returns and advantages written from the
paper's notation; its graph optimised after the first step."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from repertory import experiment as experiment_lib
from repertory.agents import impala
from repertory.components import losses
from repertory.agents.actor_critic import config as ac_config
from repertory.agents.actor_critic import learning

CATCH = experiment_lib.environment_spec('catch')
T, B, GAMMA = 4, 3, 0.9


def _batch(network, rng):
  """[B, T + 1] unrolls with no resets whose behaviour logits are the
  network's own (on-policy: ρ = c = 1)."""
  obs = rng.uniform(size=(B, T + 1, 10, 5)).astype(np.float32)
  outputs, _ = network.unroll(np.swapaxes(obs, 0, 1), network.initial_state(0))
  logits = np.swapaxes(outputs.logits.numpy(), 0, 1)           # [B, T + 1, A]
  values = outputs.value.numpy()                                # [T + 1, B]
  data = {'observation': obs,
          'action': rng.integers(0, 3, size=(B, T + 1)).astype(np.int32),
          'reward': rng.uniform(-1., 2., size=(B, T + 1)).astype(np.float32),
          'discount': np.ones((B, T + 1), np.float32),
          'step_type': np.ones((B, T + 1), np.int32),           # MID
          'extras': {'logits': logits},
          'policy_version': np.zeros((B,), np.int64)}
  return data, values


def _n_step_targets(reward, values, scale):
  """v_s = Σ_{k=s}^{T-1} γ^{k-s} scale·r_{k+1} + γ^{T-s} V(x_T): V-trace with
  λ = 1 on-policy. `reward` [B, T + 1] (step t's reward came with o_t),
  `values` [T + 1, B]; returns [T, B]."""
  vs = np.zeros((T, B))
  for b in range(B):
    for s in range(T):
      ret = sum(GAMMA ** (k - s) * scale * reward[b, k + 1]
                for k in range(s, T))
      vs[s, b] = ret + GAMMA ** (T - s) * values[T, b]
  return vs


@pytest.mark.parametrize('scale', [1.0, 0.02, 3.0])
def test_value_targets_are_returns_of_scaled_rewards(scale):
  config = impala.Config(reward_scale=scale, discount=GAMMA, vtrace_lambda=1.0,
                         entropy_cost=0.0, hidden_sizes=(8,), batch_size=B)
  algorithm = learning.VTrace(config, CATCH, replay=None, table='queue')
  data, values = _batch(algorithm.network, np.random.default_rng(0))
  vs = _n_step_targets(data['reward'], values, scale)
  metrics = algorithm._sgd_step(data, np.ones((B,), bool))  # pylint: disable=protected-access
  assert bool(metrics['applied'])
  np.testing.assert_allclose(float(metrics['charts/mean_vs']), vs.mean(),
                             rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(
      float(metrics['losses/baseline']),
      0.5 * np.mean((vs - values[:T]) ** 2), rtol=1e-4, atol=1e-6)


def test_reward_scale_must_be_positive():
  with pytest.raises(ValueError, match='reward_scale must be > 0, got 0'):
    impala.Config(reward_scale=0.0)


def test_normalized_advantages_reach_the_policy_loss():
  config = impala.Config(normalize_advantages=True, discount=GAMMA,
                         vtrace_lambda=1.0, entropy_cost=0.0,
                         hidden_sizes=(8,), batch_size=B)
  algorithm = learning.VTrace(config, CATCH, replay=None, table='queue')
  data, values = _batch(algorithm.network, np.random.default_rng(1))
  vs = _n_step_targets(data['reward'], values, 1.0)
  next_vs = np.concatenate([vs[1:], values[T:]], 0)              # v_{s+1}
  pg_adv = data['reward'][:, 1:].T + GAMMA * next_vs - values[:T]  # ρ = 1
  normalized = (pg_adv - pg_adv.mean()) / (pg_adv.std() + 1e-8)
  logits = np.swapaxes(data['extras']['logits'], 0, 1)[:T]     # [T, B, A]
  log_pi = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  log_pi_a = np.take_along_axis(log_pi, data['action'].T[:T, :, None],
                                -1)[..., 0]
  metrics = algorithm._sgd_step(data, np.ones((B,), bool))  # pylint: disable=protected-access
  np.testing.assert_allclose(float(metrics['losses/policy']),
                             -(normalized * log_pi_a).mean(), rtol=1e-4,
                             atol=1e-5)


def test_ppo_clip_reaches_the_policy_loss_and_drops_stale_unrolls():
  # On-policy (ρ = 1, inside any clip): APPO's policy loss is -mean(Â) over
  # the kept unrolls, where IMPALA's is -mean(Â log π); the dropped unroll's
  # masked transitions (ρ = exp(-1e9) = 0) add nothing and no NaN.
  config = impala.Config(ppo_clip=0.2, discount=GAMMA, vtrace_lambda=1.0,
                         entropy_cost=0.0, hidden_sizes=(8,), batch_size=B)
  algorithm = learning.VTrace(config, CATCH, replay=None, table='queue')
  data, values = _batch(algorithm.network, np.random.default_rng(2))
  vs = _n_step_targets(data['reward'], values, 1.0)
  next_vs = np.concatenate([vs[1:], values[T:]], 0)              # v_{s+1}
  pg_adv = data['reward'][:, 1:].T + GAMMA * next_vs - values[:T]  # [T, B]
  keep = np.array([True, False, True])
  metrics = algorithm._sgd_step(data, keep)  # pylint: disable=protected-access
  assert bool(metrics['applied'])
  np.testing.assert_allclose(float(metrics['losses/policy']),
                             -pg_adv[:, keep].mean(), rtol=1e-4, atol=1e-5)
  assert float(metrics['charts/clip_fraction']) == 0.0
  assert np.isfinite(float(metrics['charts/gradient_norm']))


@pytest.mark.parametrize('value', [0.0, -0.2])
def test_ppo_clip_must_be_positive_or_none(value):
  with pytest.raises(ValueError, match='ppo_clip must be > 0 or None'):
    impala.Config(ppo_clip=value)


def test_the_graph_is_optimized_by_a_step_that_updates_nothing():
  """The learner's first step runs unoptimised and hands the graph to a
  thread, which calls it on an iterator that yields nothing: the same graph
  (no second trace), no update, no results."""
  sample = collections.namedtuple('Sample', ['data'])
  config = impala.Config(hidden_sizes=(8,), batch_size=B)
  algorithm = learning.VTrace(config, CATCH, replay=None, table='queue')
  data, _ = _batch(algorithm.network, np.random.default_rng(4))
  iterator = iter(tf.data.Dataset.from_tensors(sample(data)).repeat())
  algorithm._iterator = iterator  # pylint: disable=protected-access
  algorithm._element_spec = iterator.element_spec  # pylint: disable=protected-access
  train_step = algorithm._train_step  # pylint: disable=protected-access

  train_step(iterator)
  after_first = [v.numpy() for v in algorithm.network.trainable_variables]
  assert algorithm._results.take() is not None  # pylint: disable=protected-access
  train_step._thread.join()  # pylint: disable=protected-access

  assert train_step.optimized
  assert train_step.function.experimental_get_tracing_count() == 1
  for before, variable in zip(after_first,
                              algorithm.network.trainable_variables):
    np.testing.assert_array_equal(variable.numpy(), before)
  assert algorithm._results.take() is None  # pylint: disable=protected-access
  for _ in range(2):  # The optimised graph updates as the first did.
    train_step(iterator)
    assert algorithm._results.take() is not None  # pylint: disable=protected-access


@pytest.mark.parametrize('in_graph', [False, True])
def test_passes_per_batch_are_that_many_updates_on_the_batch(in_graph):
  # Three passes on one batch leave the weights where three one-pass steps on
  # it do; the version moves once (one batch), the metrics are the first
  # pass's (the batch as the learner found it). In a graph (as the learner
  # runs it) the later passes are a loop whose updates must still run.
  def learner(passes):
    config = impala.Config(passes_per_batch=passes, ppo_clip=0.2,
                           hidden_sizes=(8,), batch_size=B)
    return learning.VTrace(config, CATCH, replay=None, table='queue', seed=3)

  three, one = learner(3), learner(1)
  data, _ = _batch(three.network, np.random.default_rng(5))
  keep = np.ones(B, bool)
  step = three._sgd_step  # pylint: disable=protected-access
  if in_graph:
    step = tf.function(step, autograph=False)
  metrics = step(data, keep)
  first = one._sgd_step(data, keep)  # pylint: disable=protected-access
  for _ in range(2):
    one._sgd_step(data, keep)  # pylint: disable=protected-access
  for a, b in zip(three.network.trainable_variables,
                  one.network.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
  assert int(three._version.numpy()) == 1  # pylint: disable=protected-access
  assert float(metrics['losses/policy']) == pytest.approx(
      float(first['losses/policy']), rel=1e-5)
  moved = [not np.allclose(a.numpy(), b.numpy()) for a, b in zip(
      three.network.trainable_variables,
      learner(1).network.trainable_variables)]
  assert any(moved)


def test_targets_once_per_batch_keeps_the_first_targets_over_the_passes():
  # Three passes with the targets of the network before the first: each is an
  # Adam step on -mean(min(ρ Â, clip(ρ) Â)) + ½ baseline_cost mean((v - V)²)
  # with v and Â the n-step returns and advantages of the initial values
  # (on-policy, λ = 1: ρ̄ = 1), written here from the definitions; recomputed
  # targets (the default) end elsewhere. One pass is the same either way.
  epsilon, cost = 0.2, 0.5

  def learner(passes, once):
    config = impala.Config(passes_per_batch=passes, ppo_clip=epsilon,
                           targets_once_per_batch=once, discount=GAMMA,
                           vtrace_lambda=1.0, entropy_cost=0.0,
                           baseline_cost=cost, hidden_sizes=(8,), batch_size=B)
    return learning.VTrace(config, CATCH, replay=None, table='queue', seed=3)

  once, recomputed = learner(3, True), learner(3, False)
  by_hand = learner(1, True)
  data, values = _batch(once.network, np.random.default_rng(8))
  keep = np.ones(B, bool)
  vs = _n_step_targets(data['reward'], values, 1.0)
  next_vs = np.concatenate([vs[1:], values[T:]], 0)
  advantages = data['reward'][:, 1:].T + GAMMA * next_vs - values[:T]
  observation = np.swapaxes(data['observation'], 0, 1)
  actions = data['action'].T[:T]
  behaviour = tf.nn.log_softmax(
      np.swapaxes(data['extras']['logits'], 0, 1)[:T])
  behaviour_a = tf.gather(behaviour, actions, batch_dims=2)
  network = by_hand.network
  for _ in range(3):
    with tf.GradientTape() as tape:
      outputs, _ = network.unroll(observation, network.initial_state(0))
      log_pi_a = tf.gather(tf.nn.log_softmax(outputs.logits[:T]), actions,
                           batch_dims=2)
      ratio = tf.exp(log_pi_a - behaviour_a)
      surrogate = tf.minimum(ratio * advantages, tf.clip_by_value(
          ratio, 1 - epsilon, 1 + epsilon) * advantages)
      loss = (-tf.reduce_mean(surrogate) + cost * 0.5 * tf.reduce_mean(
          tf.square(vs - outputs.value[:T])))
    params = network.trainable_variables
    gradients, _ = tf.clip_by_global_norm(tape.gradient(loss, params), 40.0)
    by_hand.optimizer.apply(gradients, params)

  once._sgd_step(data, keep)  # pylint: disable=protected-access
  recomputed._sgd_step(data, keep)  # pylint: disable=protected-access
  for a, b in zip(once.network.trainable_variables, params):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
  assert any(not np.allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
             for a, b in zip(recomputed.network.trainable_variables, params))

  one_once, one = learner(1, True), learner(1, False)
  one_once._sgd_step(data, keep)  # pylint: disable=protected-access
  one._sgd_step(data, keep)  # pylint: disable=protected-access
  for a, b in zip(one_once.network.trainable_variables,
                  one.network.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('form', ['gae', 'vtrace'])
def test_pg_advantage_reaches_the_policy_loss(form):
  # On-policy with λ = 0.8, one update without clip or entropy: the policy
  # loss is -mean(A log π(a)) with A GAE(λ) written here from its definition
  # (A_s = Σ_k (γλ)^k δ_{s+k}); the paper's form (the default) is not that.
  lam = 0.8
  config = impala.Config(discount=GAMMA, vtrace_lambda=lam, pg_advantage=form,
                         entropy_cost=0.0, hidden_sizes=(8,), batch_size=B)
  algorithm = learning.VTrace(config, CATCH, replay=None, table='queue')
  data, values = _batch(algorithm.network, np.random.default_rng(9))
  deltas = data['reward'][:, 1:].T + GAMMA * values[1:] - values[:T]
  gae = np.zeros((T, B))
  for s in range(T):
    gae[s] = sum((GAMMA * lam) ** (k - s) * deltas[k] for k in range(s, T))
  logits = np.swapaxes(data['extras']['logits'], 0, 1)[:T]
  log_pi = tf.gather(tf.nn.log_softmax(logits), data['action'].T[:T],
                     batch_dims=2).numpy()
  expected = -np.mean(gae * log_pi)
  metrics = algorithm._sgd_step(data, np.ones((B,), bool))  # pylint: disable=protected-access
  got = float(metrics['losses/policy'])
  if form == 'gae':
    assert got == pytest.approx(expected, rel=1e-4, abs=1e-6)
  else:
    assert got != pytest.approx(expected, rel=1e-2, abs=1e-4)


def test_config_offers_the_pg_advantages_of_the_loss():
  # The config cannot import the loss (TensorFlow); its choices must agree.
  assert ac_config.PG_ADVANTAGES == losses.PG_ADVANTAGES


def test_passes_per_batch_must_be_positive():
  with pytest.raises(ValueError, match='passes_per_batch must be a positive'):
    impala.Config(passes_per_batch=0)


def test_the_annealed_ppo_clip_is_the_one_the_loss_uses():
  # Update 0 of an anneal over two batches uses half the clip: the same
  # update as a learner whose clip is that half, not the full one, on a batch
  # whose behaviour policy differs from the learner's (so the clip binds).
  def learner(**kwargs):
    config = impala.Config(hidden_sizes=(8,), batch_size=B, unroll_length=T,
                           entropy_cost=0.0, **kwargs)
    return learning.VTrace(config, CATCH, replay=None, table='queue', seed=4)

  annealed = learner(ppo_clip=0.4, anneal_ppo_clip=True,
                     learning_rate_anneal_steps=2 * B * T)
  assert annealed._ppo_clip.update(0) == {'charts/ppo_clip': 0.2}  # pylint: disable=protected-access
  data, _ = _batch(annealed.network, np.random.default_rng(6))
  data['extras']['logits'] = data['extras']['logits'] + np.random.default_rng(
      7).normal(scale=0.5, size=data['extras']['logits'].shape).astype(
          np.float32)
  keep = np.ones(B, bool)
  metrics = {k: float(v) for k, v in annealed._sgd_step(data, keep).items()}  # pylint: disable=protected-access
  half = {k: float(v) for k, v in learner(ppo_clip=0.2)._sgd_step(  # pylint: disable=protected-access
      data, keep).items()}
  full = {k: float(v) for k, v in learner(ppo_clip=0.4)._sgd_step(  # pylint: disable=protected-access
      data, keep).items()}
  assert metrics['charts/clip_fraction'] == half['charts/clip_fraction']
  assert metrics['losses/policy'] == pytest.approx(half['losses/policy'],
                                                   rel=1e-5)
  assert metrics['charts/clip_fraction'] > full['charts/clip_fraction']
