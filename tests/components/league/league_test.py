"""The league: snapshots on the model store, matchmaking by each rule,
payoffs and Elo against hand-computed values, and restart."""


import collections

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import league as league_lib
from repertory.components import networks


def make_network(obs_size=5, num_actions=3):
  network = networks.PolicyValueNetwork(networks.MLPTorso((8,), 1),
                                        num_actions=num_actions)
  network(tf.zeros((1, obs_size)))
  return network


def weights_of(seed):
  network = make_network()
  rng = np.random.default_rng(seed)
  return {k: rng.normal(size=v.shape).astype(np.float32)
          for k, v in networks.get_variables(network).items()}


def new_league(tmp_path, **kwargs):
  kwargs.setdefault('snapshot_every_steps', None)
  return league_lib.League(str(tmp_path / 'league'), make_network, **kwargs)


def test_add_get_and_restart(tmp_path):
  league = new_league(tmp_path, matchmaking='uniform')
  a = league.add_player(weights_of(1), version=10, step=100)
  b = league.add_player(weights_of(2), version=20, step=200)
  assert (a, b) == ('main@v10', 'main@v20')
  league.report([('main', a, 1.0), ('main', b, 0.0), ('main', b, 0.5)])
  elo, payoff = league.elo(), league.payoff('main', b)
  league.save()
  del league
  again = new_league(tmp_path, matchmaking='uniform')
  assert [p['id'] for p in again.players()] == [a, b]
  assert again.elo() == pytest.approx(elo)
  assert again.payoff('main', b) == pytest.approx(payoff) == 0.25
  assert again.games('main', b) == 2
  version, weights = again.get_weights(b)  # Read back from the model store.
  assert version == 20
  for name, value in weights_of(2).items():
    np.testing.assert_array_equal(weights[name], value)
  # The restarted league goes on: a third snapshot joins the same pool.
  again.add_player(weights_of(3), version=30, step=300)
  assert len(new_league(tmp_path).players()) == 3


def test_elo_and_payoff_against_hand_computed_values(tmp_path):
  league = new_league(tmp_path, elo_k=32)
  league.add_player(weights_of(1), version=1, step=1)  # Elo 1000, like main.
  # Game 1: main wins. E = 0.5 -> main 1016, snapshot 984.
  league.report([('main', 'main@v1', 1.0)])
  assert league.elo()['main'] == pytest.approx(1016.0)
  assert league.elo()['main@v1'] == pytest.approx(984.0)
  # Game 2: main loses. E_main = 1 / (1 + 10^(-32/400)) = 0.545922...
  e_main = 1.0 / (1.0 + 10 ** (-32.0 / 400.0))
  assert e_main == pytest.approx(0.5459223, abs=1e-6)
  league.report([('main', 'main@v1', 0.0)])
  assert league.elo()['main'] == pytest.approx(1016.0 - 32 * e_main)
  assert league.elo()['main@v1'] == pytest.approx(984.0 + 32 * e_main)
  # Game 3: a draw. Payoff: 1 + 0 + 0.5 over 3 games.
  league.report([('main', 'main@v1', 0.5)])
  assert league.payoff('main', 'main@v1') == pytest.approx(0.5)
  assert league.payoff('main@v1', 'main') == pytest.approx(0.5)
  assert league.games('main', 'main@v1') == 3
  # A game against itself (naive self-play) changes no rating.
  before = league.elo()
  league.report([('main', 'main', 1.0)])
  assert league.elo() == before
  assert league.summary()['league/games'] == 4


def test_new_snapshot_starts_at_its_learners_rating(tmp_path):
  league = new_league(tmp_path)
  league.add_player(weights_of(1), version=1, step=1)
  league.report([('main', 'main@v1', 1.0)] * 5)
  league.add_player(weights_of(2), version=2, step=2)
  assert league.elo()['main@v2'] == pytest.approx(league.elo()['main'])


def _frequencies(league, n):
  picks = [p for p, _ in league.sample_opponents('main', n)]
  ids = [p['id'] for p in league.players()]
  return np.array([picks.count(i) for i in ids]) / n


def _pool(tmp_path, rule, win_rates, **kwargs):
  league = new_league(tmp_path, matchmaking=rule, seed=3, **kwargs)
  for i, rate in enumerate(win_rates):
    player = league.add_player(weights_of(i), version=i, step=i)
    wins = int(round(rate * 20))
    league.report([('main', player, 1.0)] * wins +
                  [('main', player, 0.0)] * (20 - wins))
  return league


def test_latest(tmp_path):
  league = _pool(tmp_path, 'latest', [0.5, 0.5, 0.5])
  assert league.sample_opponents('main', 3) == [
      ('main', league_lib.LIVE_VERSION)] * 3  # Naive self-play: itself.
  league = _pool(tmp_path / 'b', 'latest', [0.5, 0.5, 0.5],
                 latest_is_live=False)
  assert league.sample_opponents('main', 3) == [('main@v2', 2)] * 3


def test_uniform(tmp_path):
  league = _pool(tmp_path, 'uniform', [0.9, 0.1, 0.5, 0.5])
  freq = _frequencies(league, 8000)
  # Binomial standard error sqrt(.25 * .75 / 8000) = 0.0048: 5 sigma.
  np.testing.assert_allclose(freq, 0.25, atol=0.025)


def test_pfsp_weights_by_win_rate(tmp_path):
  win_rates = [0.9, 0.1, 0.5, 1.0]
  league = _pool(tmp_path, 'pfsp', win_rates)
  # AlphaStar's f_hard: (1 - x)^2, normalised, by hand.
  raw = np.array([0.01, 0.81, 0.25, 0.0])
  expected = raw / raw.sum()
  np.testing.assert_allclose(league_lib.pfsp_weights(win_rates), expected)
  freq = _frequencies(league, 8000)
  np.testing.assert_allclose(freq, expected, atol=0.03)
  assert freq[3] == 0.0  # Never the snapshot it always beats.


def test_pool_empty_gives_self_play(tmp_path):
  league = new_league(tmp_path, matchmaking='pfsp')
  assert league.sample_opponents('main', 2) == [('main', -1)] * 2


def test_exploiter_meets_main_snapshots_only(tmp_path):
  league = new_league(tmp_path, matchmaking='uniform')
  league.add_player(weights_of(1), version=1, step=1, role='main')
  league.add_player(weights_of(2), version=1, step=1, role='exploiter')
  picks = {p for p, _ in league.sample_opponents('exploiter', 200)}
  assert picks == {'main@v1'}
  picks = {p for p, _ in league.sample_opponents('main', 200)}
  assert picks == {'main@v1', 'exploiter@v1'}


def test_snapshots_on_schedule_and_by_margin(tmp_path):
  league = new_league(tmp_path, snapshot_every_steps=100)
  assert league.maybe_add(weights_of(0), 1, step=0) == 'main@v1'  # First.
  assert league.maybe_add(weights_of(0), 2, step=99) is None
  assert league.maybe_add(weights_of(0), 3, step=100) == 'main@v3'
  margin = new_league(tmp_path / 'm', snapshot_win_rate=0.7, min_games=10)
  margin.maybe_add(weights_of(0), 1, step=0)
  margin.report([('main', 'main@v1', 1.0)] * 6 + [('main', 'main@v1', 0.0)] * 3)
  assert margin.maybe_add(weights_of(0), 2, step=5) is None  # 9 games.
  margin.report([('main', 'main@v1', 1.0)])  # 7 of 10: the margin.
  assert margin.maybe_add(weights_of(0), 3, step=6) == 'main@v3'
  assert margin.maybe_add(weights_of(0), 4, step=7) is None  # New window.


def test_bad_arguments_get_one_line(tmp_path):
  with pytest.raises(ValueError, match=r"Unknown matchmaking rule 'best'; "
                     'known: alphastar, latest, pfsp, pfsp_variance, uniform'):
    new_league(tmp_path, matchmaking='best')
  league = new_league(tmp_path)
  with pytest.raises(ValueError, match="Unknown role 'coach'"):
    league.add_player(weights_of(0), 1, 1, role='coach')
  with pytest.raises(KeyError, match='No snapshot'):
    league.get_weights('main@v7')
  with pytest.raises(ValueError, match='score is in'):
    league.report([('main', 'x', 2.0)])


def test_numpy_policy_matches_the_network():
  network = make_network()
  policy = league_lib.MLPPolicy(networks.get_variables(network))
  obs = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
  out = network(tf.constant(obs))
  logits, values = policy(obs)
  np.testing.assert_allclose(logits, out.logits.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(values, out.value.numpy(), rtol=1e-5, atol=1e-5)
  legal = np.array([[1, 0, 1]] * 4, np.float32)
  probs = policy.probabilities(obs, legal)
  assert np.all(probs[:, 1] == 0.0)
  np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)
  actions, _ = policy.act(np.repeat(obs, 500, 0), np.repeat(legal, 500, 0),
                          np.random.default_rng(1))
  assert not np.any(actions == 1)


# --- main exploiters (AlphaStar) ------------------------------------------------

def test_learner_roles():
  assert league_lib.learner_role('main') == 'main'
  assert league_lib.learner_role(league_lib.exploiter_name(3)) == 'exploiter'
  assert league_lib.learner_role('exploiter') == 'exploiter'
  with pytest.raises(ValueError, match="Unknown role 'exploiterX'"):
    league_lib.learner_role('exploiterX')


def test_main_samples_exploiter_snapshots_and_exploiters_only_main(tmp_path):
  league = new_league(tmp_path, matchmaking='pfsp', seed=5)
  league.add_player(weights_of(1), version=1, step=1)
  league.add_player(weights_of(2), version=9, step=9, role='exploiter0')
  league.add_player(weights_of(3), version=4, step=4, role='exploiter1')
  league.add_player(weights_of(4), version=2, step=2)
  roles = {p['id']: (p['role'], p['learner']) for p in league.players()}
  assert roles == {'main@v1': ('main', 'main'),
                   'exploiter0@v9': ('exploiter', 'exploiter0'),
                   'exploiter1@v4': ('exploiter', 'exploiter1'),
                   'main@v2': ('main', 'main')}
  # Main beats main@v1 and exploiter1 always, loses to exploiter0: PFSP
  # (1 - x)^2 puts weight 0, 1, 0, 0.25 on the pool (oldest first).
  league.report([('main', 'main@v1', 1.0)] * 10 +
                [('main', 'exploiter0@v9', 0.0)] * 10 +
                [('main', 'exploiter1@v4', 1.0)] * 10 +
                [('main', 'main@v2', 0.5)] * 10)
  picks = [p for p, _ in league.sample_opponents('main', 4000)]
  assert set(picks) == {'exploiter0@v9', 'main@v2'}
  assert picks.count('exploiter0@v9') / 4000 == pytest.approx(0.8, abs=0.03)
  # Exploiters meet the main agent's newest snapshot only, whatever the rule.
  for exploiter in ('exploiter0', 'exploiter1'):
    assert set(league.sample_opponents(exploiter, 500)) == {('main@v2', 2)}
  assert league.newest('main') == ('main@v2', 2)
  assert league.summary()['league/main/win_rate_vs_exploiters'] == 0.5


def test_exploiter_without_main_snapshot_plays_itself(tmp_path):
  league = new_league(tmp_path, matchmaking='uniform')
  league.add_player(weights_of(1), version=3, step=3, role='exploiter0')
  assert league.sample_opponents('exploiter0', 2) == [
      ('exploiter0', league_lib.LIVE_VERSION)] * 2


def test_exploiter_generation_ends_on_win_rate_or_step_budget(tmp_path):
  league = new_league(tmp_path, min_games=10, exploiter_win_rate=0.7,
                      exploiter_reset_steps=1000)
  league.add_player(weights_of(0), version=1, step=0)  # main@v1
  # The first offer starts the exploiter's generation; no snapshot.
  assert league.maybe_add(weights_of(1), 5, step=10, role='exploiter0') is None
  assert [p['id'] for p in league.players()] == ['main@v1']
  league.report([('exploiter0', 'main@v1', 1.0)] * 6 +
                [('exploiter0', 'main@v1', 0.0)] * 3)
  assert league.maybe_add(weights_of(1), 6, step=20,
                          role='exploiter0') is None  # 9 games.
  league.report([('exploiter0', 'main@v1', 1.0)])  # 7 of 10 beat main.
  summary = league.summary()
  assert summary['league/exploiter0/win_rate_vs_main'] == pytest.approx(0.7)
  assert summary['league/exploiter0/resets'] == 0
  elo = league.elo()['exploiter0']
  assert elo > 1000
  assert league.maybe_add(weights_of(1), 7, step=30,
                          role='exploiter0') == 'exploiter0@v7'
  assert league.elo()['exploiter0@v7'] == pytest.approx(elo)
  league.reset_learner('exploiter0', step=30)
  summary = league.summary()
  assert summary['league/exploiter0/resets'] == 1
  assert 'league/exploiter0/win_rate_vs_main' not in summary  # New window.
  assert league.elo()['exploiter0'] == 1000.0  # Initial weights: initial Elo.
  # The step budget: 1000 steps after the reset, whatever the score.
  league.report([('exploiter0', 'main@v1', 0.0)] * 20)
  assert league.maybe_add(weights_of(1), 8, step=1029,
                          role='exploiter0') is None
  assert league.maybe_add(weights_of(1), 9, step=1030,
                          role='exploiter0') == 'exploiter0@v9'
  league.reset_learner('exploiter0', step=1030, like='main@v1')
  assert league.elo()['exploiter0'] == league.elo()['main@v1']
  with pytest.raises(ValueError, match='resets exploiters'):
    league.reset_learner('main', step=1)
  # The generations survive a restart.
  league.save()
  again = new_league(tmp_path, min_games=10)
  assert again.summary()['league/exploiter0/resets'] == 2
  table = {row['id']: row for row in again.table()}
  assert table['exploiter0@v9']['role'] == 'exploiter'
  assert table['main']['role'] == 'main'
  assert table['exploiter0']['games'] == 30


def test_the_league_plays_live_self_play_and_the_pool(tmp_path):
  league = new_league(tmp_path, matchmaking='alphastar', seed=3)
  league.add_player(weights_of(1), version=1, step=1)
  league.add_player(weights_of(2), version=5, step=5, role='exploiter0')
  league.report([('main', 'main@v1', 1.0)] * 10 +
                [('main', 'exploiter0@v5', 0.0)] * 10)
  picks = collections.Counter(league.sample_opponents('main', 4000))
  live = ('main', league_lib.LIVE_VERSION)
  assert set(picks) == {live, ('exploiter0@v5', 5)}  # main@v1: weight 0.
  assert picks[live] / 4000 == pytest.approx(0.35, abs=0.03)
  # Exploiters still meet the main agent's newest snapshot only.
  assert set(league.sample_opponents('exploiter0', 100)) == {('main@v1', 1)}


def test_numpy_policy_plays_a_board_torso():
  # BoardTorso's convolutions in numpy (im2col) against TensorFlow's.
  network = networks.PolicyValueNetwork(
      networks.BoardTorso(channels=(8, 4), hidden_sizes=(16,)), num_actions=7)
  boards = np.random.default_rng(0).integers(
      0, 2, size=(5, 3, 6, 7)).astype(np.float32)
  out = network(tf.constant(boards))
  weights = networks.get_variables(network)
  assert 'torso/convs/1/w' in weights and 'torso/mlp/layers/0/w' in weights
  logits, values = league_lib.MLPPolicy(weights)(boards)
  np.testing.assert_allclose(logits, out.logits.numpy(), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(values, out.value.numpy(), rtol=1e-4, atol=1e-5)
