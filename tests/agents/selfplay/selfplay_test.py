"""The selfplay agent: config checks, games it refuses, and short test_mt
runs on Kuhn poker that raise the return against a random player (NeuRD,
and its V-trace and PPO losses) and fill
the league (snapshots, payoffs, per-game opponent log)."""

import csv
import json
import os
import time

import numpy as np
import pytest

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import selfplay
from repertory.agents.selfplay import program as program_lib
from repertory.components import league as league_lib
from repertory.components.evaluation import evaluator
from repertory.environments import multiagent

GAME = 'openspiel:kuhn_poker'


def test_config_rejects_bad_values():
  with pytest.raises(ValueError, match=r"matchmaking='best'; choose one of "
                     'latest, uniform, pfsp'):
    selfplay.Config(matchmaking='best')
  with pytest.raises(ValueError, match='batch_size'):
    selfplay.Config(batch_size=0)
  with pytest.raises(ValueError, match='pool never grows'):
    selfplay.Config(snapshot_every_steps=None, snapshot_win_rate=None)
  with pytest.raises(ValueError, match=r'conv_channels must be positive, got '
                     r'\(8, 0\)'):
    selfplay.Config(conv_channels=(8, 0))


@pytest.mark.parametrize('env, match', [
    ('catch', 'single-agent environment'),
    ('openspiel:matrix_rps', 'simultaneous'),
])
def test_refuses_games_it_cannot_play(env, match, tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=env, logdir=str(tmp_path))
  with pytest.raises(ValueError, match=match):
    selfplay.make_program(selfplay.Config(), experiment)


def test_refuses_convolutions_where_there_is_no_board(tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=GAME, logdir=str(tmp_path))
  with pytest.raises(ValueError, match=r"conv_channels=\(8,\) convolves "
                     r"board planes \[C, H, W\]; 'openspiel:kuhn_poker' gives "
                     r'observations of shape \(11,\)'):
    selfplay.make_program(selfplay.Config(conv_channels=(8,)), experiment)
  with pytest.raises(ValueError, match='LSTM network has an MLP torso'):
    selfplay.make_program(selfplay.Config(
        conv_channels=(8,), use_lstm=True, policy_loss='vtrace'), experiment)


class _Greedy:
  """Plays a weights dict (as the monitor's evaluation actor does)."""

  def __init__(self, weights, seed=0):
    self._policy = league_lib.MLPPolicy(weights)
    self._rng = np.random.default_rng(seed)

  def select_action(self, observation):
    action, _ = self._policy.act(observation['observation'][None],
                                 observation['legal_actions'][None],
                                 self._rng)
    return int(action[0])

  def observe_first(self, timestep):
    pass

  def observe(self, action, next_timestep):
    pass

  def update(self, wait=False):
    pass


def _return_vs_random(weights, games=4000):
  env = multiagent.VersusEnvironment(environments.make(GAME, seed=7),
                                     multiagent.RandomOpponent(seed=8))
  return evaluator.evaluate(env, _Greedy(weights), games).return_mean


def _run(tmp_path, matchmaking, learner_steps, env=GAME, **config):
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=env, num_actors=1, envs_per_actor=16,
      max_actor_steps=10**9, logdir=str(tmp_path), launch_type='test_mt')
  program = selfplay.make_program(
      selfplay.Config(matchmaking=matchmaking, batch_size=32,
                      hidden_sizes=(32,), **config), experiment)
  launched = launch.launch(program, launch_type='test_mt')
  try:
    learner = program.groups['learner'][0].create_handle().dereference()
    league = program.groups['league'][0].create_handle().dereference()
    first = learner.get_variables(['policy'])
    deadline = time.monotonic() + 240
    while (learner.get_variables(['policy']).version < learner_steps and
           time.monotonic() < deadline):
      time.sleep(0.5)
    last = learner.get_variables(['policy'])
    players = league.players()
    summary = league.summary()
    if 'inference' in program.groups:  # SEED-style: what the server played.
      server = program.groups['inference'][0].create_handle().dereference()
      summary['server'] = server.stats()
  finally:
    launched.stop(timeout=60)
  return first, last, players, summary


@pytest.mark.slow  # A learning test: its margin is not kept on a loaded machine.
def test_self_play_raises_the_return_against_random(tmp_path):
  first, last, players, summary = _run(tmp_path, 'latest', 600,
                                       snapshot_every_steps=200)
  assert last.version >= 600
  before = _return_vs_random(first.variables[0])
  after = _return_vs_random(last.variables[0])
  # The standard error of each mean is about 1.4 / sqrt(4000) = 0.022.
  assert after > before + 0.06, (before, after)
  assert len(players) >= 3  # At 0 (first offer), 200, 400, ...
  assert summary['league/games'] > 1000
  with open(os.path.join(tmp_path, 'games', 'actor_0.csv')) as f:
    rows = list(csv.DictReader(f))
  assert rows and {r['opponent'] for r in rows} == {'main'}  # Itself.


@pytest.mark.slow  # A learning test: its margin is not kept on a loaded machine.
@pytest.mark.parametrize('policy_loss, inference, matchmaking, learner_steps', [
    ('vtrace', 'local', 'pfsp', 300),   # --agent=impala --selfplay=pfsp
    ('vtrace', 'server', 'pfsp', 300),  # --agent=seed --selfplay=pfsp
    ('ppo', 'local', 'latest', 150),    # --agent=ppo --selfplay=latest
])
def test_variant_raises_the_return_against_random(
    policy_loss, inference, matchmaking, learner_steps, tmp_path):
  first, last, players, summary = _run(
      tmp_path, matchmaking, learner_steps, policy_loss=policy_loss,
      inference=inference, snapshot_every_steps=50)
  assert last.version >= learner_steps
  before = _return_vs_random(first.variables[0])
  after = _return_vs_random(last.variables[0])
  # The standard error of each mean is about 1.4 / sqrt(4000) = 0.022.
  assert after > before + 0.1, (before, after)
  assert len(players) >= 3 and summary['league/games'] > 1000
  with open(os.path.join(tmp_path, 'games', 'actor_0.csv')) as f:
    rows = list(csv.DictReader(f))
  opponents = {r['opponent'] for r in rows}
  if matchmaking == 'latest':
    assert opponents == {'main'}
  else:  # PFSP meets the pool's snapshots.
    assert opponents & {p['id'] for p in players}
  if inference == 'server':  # The server played those snapshots.
    assert set(summary['server']['opponents']) <= {p['id'] for p in players}
    assert sum(summary['server']['opponents'].values()) > 1000


def test_pfsp_plays_snapshots_and_rates_them(tmp_path):
  _, last, players, summary = _run(tmp_path, 'pfsp', 150,
                                   snapshot_every_steps=50)
  assert last.version >= 150
  ids = {p['id'] for p in players}
  assert len(ids) >= 2
  with open(os.path.join(tmp_path, 'games', 'actor_0.csv')) as f:
    rows = list(csv.DictReader(f))
  met = {(r['opponent'], int(r['opponent_version'])) for r in rows}
  # Every opponent is a snapshot of the pool, logged with its version.
  assert {o for o, _ in met} <= ids | {'main'}
  assert any(o in ids for o, _ in met)
  for opponent, version in met:
    if opponent != 'main':
      assert opponent == league_lib.snapshot_id('main', version)
  assert 'league/main/elo' in summary
  with open(os.path.join(tmp_path, 'league', 'league.json')) as f:
    state = json.load(f)
  assert state['payoff'], 'games against snapshots reach the payoff table'


def test_board_torso_plays_connect_four_against_its_snapshots(tmp_path):
  # The learner's convolutions (TensorFlow) and the actors' (numpy, for
  # the live policy and the league's snapshots) are the same network.
  _, last, _, _ = _run(
      tmp_path, 'pfsp', 12, env='openspiel:connect_four/relative',
      snapshot_every_steps=3, conv_channels=(4,))
  assert last.version >= 12
  assert 'torso/convs/0/w' in last.variables[0]
  with open(os.path.join(tmp_path, 'league', 'league.json')) as f:
    state = json.load(f)
  assert state['architecture'] == {'network': 'board_policy_q',
                                   'conv_channels': [4], 'hidden_sizes': [32]}
  assert state['payoff'], 'games against snapshots reach the payoff table'


def test_game_specs():
  spec, steps = program_lib.game_specs(GAME, selfplay.Config())
  assert steps == 3  # Kuhn poker's longest game.
  assert spec.observations['observation'].shape == (11,)
  assert spec.actions.num_values == 2


def test_search_values_a_position_as_the_learner_does():
  # `MLPPolicy.policy_value` (numpy, what `repertory.play`'s search: player
  # and `components.search` read) against the TensorFlow network: π over
  # the legal actions and V = Σ π Q, the value the learner trains.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from repertory.agents.selfplay import networks as networks_lib  # pylint: disable=g-import-not-at-top
  from repertory.components import networks  # pylint: disable=g-import-not-at-top
  spec, _ = program_lib.game_specs('openspiel:connect_four/relative',
                                   selfplay.Config())
  network = networks_lib.make_network(spec, (16,), conv_channels=(4,))
  rng = np.random.default_rng(0)
  boards = rng.integers(0, 2, size=(5, 3, 6, 7)).astype(np.float32)
  legal = rng.integers(0, 2, size=(5, 7)).astype(np.float32)
  legal[:, 0] = 1.0
  out = network(tf.constant(boards))
  pi = tf.nn.softmax(networks_lib.masked_logits(out.logits, legal)).numpy()
  probs, value = league_lib.MLPPolicy(
      networks.get_variables(network)).policy_value(boards, legal)
  np.testing.assert_allclose(probs, pi, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(value, np.sum(pi * out.q.numpy(), -1),
                             rtol=1e-4, atol=1e-5)
