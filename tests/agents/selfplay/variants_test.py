"""Self-play of IMPALA and PPO (`--selfplay=<rule>`, policy_loss=vtrace|ppo):
the flag's rewriting and refusals, the V-trace loss on padded per-player
items against the IMPALA loss on each item's unpadded steps, and one PPO
update (their learning runs are in selfplay_test.py)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from repertory.agents import selfplay
from repertory.agents.selfplay import networks as networks_lib
from repertory.agents.selfplay import program as program_lib
from repertory.agents.selfplay import updates
from repertory.agents.selfplay import variants
from repertory.components import losses

GAME = 'openspiel:kuhn_poker'


# --- the flag ------------------------------------------------------------------

@pytest.mark.parametrize('argv, agent, expected', [
    (['run', '--env=x', '--selfplay=pfsp', '--agent=impala'], 'impala',
     ['run', '--agent=selfplay', '--config.policy_loss=vtrace',
      '--config.inference=local', '--config.matchmaking=pfsp', '--env=x']),
    (['run', '--agent', 'ppo', '--selfplay', 'latest'], 'ppo',
     ['run', '--agent=selfplay', '--config.policy_loss=ppo',
      '--config.inference=local', '--config.matchmaking=latest']),
    (['run', '--agent=seed', '--selfplay=uniform'], 'seed',
     ['run', '--agent=selfplay', '--config.policy_loss=vtrace',
      '--config.inference=server', '--config.matchmaking=uniform']),
    (['run', '--agent=selfplay', '--selfplay=pfsp_variance',
      '--config.policy_loss=a2c'], 'selfplay',
     ['run', '--agent=selfplay', '--config.matchmaking=pfsp_variance',
      '--config.policy_loss=a2c']),
    (['run', '--agent=impala', '--config.learning_rate=0.1'], 'impala',
     ['run', '--agent=impala', '--config.learning_rate=0.1']),
])
def test_rewrite_argv(argv, agent, expected):
  assert variants.rewrite_argv(argv, agent) == expected


@pytest.mark.parametrize('argv, agent, match', [
    (['run', '--selfplay=best'], 'impala',
     r"--selfplay='best'; choose one of latest, uniform, pfsp, pfsp_variance"),
    (['run', '--selfplay=pfsp'], 'r2d2',
     '--selfplay works with --agent=impala, seed, ppo, selfplay; got '
     '--agent=r2d2'),
    (['run', '--selfplay=pfsp', '--config.policy_loss=neurd'], 'ppo',
     'sets --config.policy_loss=ppo; got --config.policy_loss=neurd'),
])
def test_rewrite_argv_refuses(argv, agent, match):
  with pytest.raises(ValueError, match=match):
    variants.rewrite_argv(argv, agent)


def test_bad_selfplay_value_is_one_line(tmp_path):
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.run', '--agent=impala',
       f'--env={GAME}', '--selfplay=nash', f'--logdir={tmp_path}/run'],
      capture_output=True, text=True, timeout=120, check=False,
      env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
  assert result.returncode != 0
  assert result.stderr.strip().splitlines() == [
      "repertory.run: error: --selfplay='nash'; choose one of latest, "
      'uniform, pfsp, pfsp_variance, alphastar.']
  assert not os.path.exists(tmp_path / 'run')  # Nothing half-written.


def test_config_rejects_bad_values():
  with pytest.raises(ValueError, match="inference='gpu'; choose one of "
                     'local, server'):
    selfplay.Config(inference='gpu')
  with pytest.raises(ValueError, match='ppo_clip=0'):
    selfplay.Config(ppo_clip=0)


# --- the V-trace loss on padded items --------------------------------------------

def _items(spec, lengths, pad_to, seed=0):
  """Items as the SequenceAdder writes them: `lengths[b]` moves, then LAST
  (the final observation), then zero padding (LAST) up to `pad_to` steps."""
  rng = np.random.default_rng(seed)
  obs_dim = spec.observations['observation'].shape[0]
  num_actions = spec.actions.num_values
  b = len(lengths)
  data = {
      'observation': {
          'observation': np.zeros((b, pad_to, obs_dim), np.float32),
          'legal_actions': np.zeros((b, pad_to, num_actions), np.float32)},
      'action': np.zeros((b, pad_to), np.int32),
      'reward': np.zeros((b, pad_to), np.float32),
      'discount': np.zeros((b, pad_to), np.float32),
      'step_type': np.full((b, pad_to), 2, np.int32),
      'extras': {'log_prob': np.zeros((b, pad_to), np.float32)}}
  for i, n in enumerate(lengths):
    data['observation']['observation'][i, :n + 1] = rng.normal(
        size=(n + 1, obs_dim))
    data['observation']['legal_actions'][i, :n] = 1.0
    data['action'][i, :n] = rng.integers(num_actions, size=n)
    data['reward'][i, n - 1] = rng.choice([-2.0, -1.0, 1.0, 2.0])
    data['discount'][i, :n - 1] = 1.0
    data['step_type'][i, :n] = 1
    data['step_type'][i, 0] = 0
    data['extras']['log_prob'][i, :n] = np.log(rng.uniform(0.2, 0.9, size=n))
  return data


def _reference_vtrace(network, data, config):
  """`losses.impala_loss` on each item's moves alone (no padding), weighted
  by their number: the mean over every valid step."""
  total, steps = 0.0, 0
  for i, n in enumerate(np.sum(data['step_type'] != 2, axis=1)):
    obs = data['observation']['observation'][i, :n]
    out = network(tf.constant(obs))
    logits = networks_lib.masked_logits(
        out.logits, tf.constant(data['observation']['legal_actions'][i, :n]))
    pi = tf.stop_gradient(tf.nn.softmax(logits))
    value = tf.reduce_sum(pi * out.q, axis=-1)
    loss = losses.impala_loss(
        logits[:, None], data['action'][i, :n, None],
        data['extras']['log_prob'][i, :n, None], value[:, None],
        tf.zeros([1]), data['reward'][i, :n, None],
        config.discount * data['discount'][i, :n, None],
        baseline_cost=config.baseline_cost, entropy_cost=config.entropy_cost)
    total += loss.loss * float(n)
    steps += int(n)
  return total / steps


def test_vtrace_loss_on_padded_items_matches_unpadded_reference():
  config = selfplay.Config(policy_loss='vtrace', entropy_cost=0.03,
                           discount=0.9)
  spec, _ = program_lib.game_specs(GAME, config)
  network = networks_lib.make_network(spec, (16,))
  for pad_to in (4, 7):  # Kuhn's longest game is 3 moves; more padding.
    data = _items(spec, [1, 3, 2], pad_to)
    with tf.GradientTape(persistent=True) as tape:
      got = updates.vtrace_loss(network, data, config)['total']
      want = _reference_vtrace(network, data, config)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    params = network.trainable_variables
    for g, w in zip(tape.gradient(got, params), tape.gradient(want, params)):
      np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def test_ppo_update_changes_the_policy_within_the_clip():
  config = selfplay.Config(policy_loss='ppo', ppo_epochs=2,
                           ppo_minibatches=2, learning_rate=1e-2)
  spec, _ = program_lib.game_specs(GAME, config)
  network = networks_lib.make_network(spec, (16,))
  update = updates.make_update(
      config, network, __import__('sonnet').optimizers.Adam(1e-2))
  before = [v.numpy() for v in network.trainable_variables]
  metrics = update(_items(spec, [3, 2, 1, 3, 2, 2], 4))
  assert metrics['applied'] and metrics['updates'] == 4
  assert metrics['samples'] == 13  # Valid steps only.
  assert np.isfinite(metrics['total']) and metrics['clip_fraction'] <= 1.0
  after = network.trainable_variables
  assert any(not np.allclose(b, a) for b, a in zip(before, after))
