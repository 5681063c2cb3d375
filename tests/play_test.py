"""`repertory.play`: players from specs, the seatings, and saved policies
read back from learner checkpoints and league snapshots."""

import numpy as np
import pytest
import tensorflow as tf

from repertory import environments
from repertory import play
from repertory import saved_policies
from repertory.components import league as league_lib
from repertory.components import model_store
from repertory.components import networks


def _network():
  network = networks.PolicyValueNetwork(networks.MLPTorso((16,), 1),
                                        num_actions=2)
  network(tf.zeros((1, 11)))
  return network


def test_random_against_random_in_both_seats():
  env = environments.make('openspiel:kuhn_poker', seed=0)
  players = [play.make_player('random', env, s, False) for s in (1, 2)]
  rows = play.play(env, players, 300)
  assert [r['seat'] for r in rows] == [0, 1]
  for row in rows:
    assert row['wins'] + row['draws'] + row['losses'] == 300
    assert row['draws'] == 0  # Poker has no draws.
    assert abs(row['mean_return']) < 0.3


def test_mcts_beats_random_at_tic_tac_toe():
  env = environments.make('openspiel:tic_tac_toe', seed=0)
  players = [play.make_player('mcts:50', env, 1, False),
             play.make_player('random', env, 2, False)]
  rows = play.play(env, players, 20)
  for row in rows:
    assert row['wins'] >= 14, row  # MCTS rarely loses to random play.


def test_saved_policies_play_their_weights(tmp_path):
  network = _network()
  store = model_store.ModelStore(str(tmp_path / 'run' / 'checkpoints'),
                                 {'network': network})
  store.save(7, 70)
  weights = saved_policies.checkpoint_weights(store.latest().path)
  for name, value in networks.get_variables(network).items():
    np.testing.assert_array_equal(weights[name], value)
  env = environments.make('openspiel:kuhn_poker', seed=0)
  player = play.make_player(f'run:{tmp_path / "run"}', env, 0, True)
  timestep = env.reset()
  expected = league_lib.MLPPolicy(weights).probabilities(
      timestep.observation['observation'][:1],
      timestep.observation['legal_actions'][:1]).argmax()
  assert player(env, timestep, 0) == expected
  # A league snapshot of the same run.
  league = league_lib.League(str(tmp_path / 'run' / 'league'), _network)
  league.add_player(networks.get_variables(network), 3, 30)
  play.make_player(f'run:{tmp_path / "run"}@main@v3', env, 0, True)
  with pytest.raises(ValueError, match=r"no league snapshot 'main@v9'; "
                     'snapshots: main@v3'):
    play.make_player(f'run:{tmp_path / "run"}@main@v9', env, 0, True)


def test_a_saved_network_searches_with_its_priors_and_values(tmp_path):
  network = networks.PolicyValueNetwork(networks.MLPTorso((16,), 3),
                                        num_actions=9)
  network(tf.zeros((1, 3, 3, 3)))
  store = model_store.ModelStore(str(tmp_path / 'checkpoints'),
                                 {'network': network})
  store.save(1, 10)
  env = environments.make('openspiel:tic_tac_toe', seed=0)
  player = play.make_player(f'search:30:ckpt:{store.latest().path}', env, 0,
                            False)
  rows = play.play(env, [player, play.make_player('random', env, 1, False)],
                   3)
  assert [r['games'] for r in rows] == [3, 3]  # Legal moves to the end.
  # Its values: the value head's (a selfplay network's: Σ π Q).
  boards = np.random.default_rng(0).normal(size=(4, 3, 3, 3))
  probs, value = league_lib.MLPPolicy(
      networks.get_variables(network)).policy_value(boards, np.ones((4, 9)))
  np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(
      value, network(tf.constant(boards, tf.float32)).value.numpy(),
      rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('env_spec, spec, match', [
    ('openspiel:kuhn_poker', 'alphazero', "Unknown player spec 'alphazero'"),
    ('openspiel:kuhn_poker', 'mcts:many', 'write mcts:<simulations>'),
    ('openspiel:kuhn_poker', 'run:/nonexistent', 'no run directory'),
    ('openspiel:tic_tac_toe', 'search:many:run:/x', 'write search:<simul'),
    ('openspiel:tic_tac_toe', 'search:10:random', 'write search:<simul'),
    ('openspiel:kuhn_poker', 'search:10:run:/x', 'two-player zero-sum'),
])
def test_bad_player_specs(env_spec, spec, match):
  env = environments.make(env_spec, seed=0)
  with pytest.raises(ValueError, match=match):
    play.make_player(spec, env, 0, False)


def test_a_run_plays_only_the_game_view_it_was_trained_on(tmp_path):
  run = tmp_path / 'run'
  run.mkdir()
  (run / 'config.json').write_text(
      '{"experiment": {"env": "openspiel:connect_four/relative"}}')
  saved_policies.check_run_env(f'run:{run}', 'openspiel:connect_four/relative')
  saved_policies.check_run_env(f'run:{run}@main@v3', 'openspiel:connect_four/relative')
  saved_policies.check_run_env('mcts:100', 'openspiel:connect_four')
  saved_policies.check_run_env(f'search:10:run:{run}', 'openspiel:connect_four/relative')
  with pytest.raises(ValueError, match='trained on'):
    saved_policies.check_run_env(f'search:10:run:{run}', 'openspiel:connect_four')
  with pytest.raises(ValueError, match=r"trained on --env='openspiel:connect_"
                     r"four/relative'; play it with --env=openspiel:connect_"
                     r"four/relative, not 'openspiel:connect_four'"):
    saved_policies.check_run_env(f'run:{run}@main@v3', 'openspiel:connect_four')


def test_a_run_s_weights_play_with_its_activation(tmp_path):
  run = tmp_path / 'run'
  run.mkdir()
  (run / 'config.json').write_text('{"config": {"activation": "tanh"}}')
  assert saved_policies.activation(f'run:{run}@main@v3') == 'tanh'
  assert saved_policies.activation(f'pool:{run}') == 'tanh'
  assert saved_policies.activation(f'search:10:run:{run}') == 'tanh'
  assert saved_policies.activation('ckpt:/no/such/ckpt-1') == 'relu'
  (run / 'config.json').write_text('{"config": {}}')  # E.g. AlphaZero's.
  assert saved_policies.activation(f'run:{run}') == 'relu'


def test_a_person_plays_at_the_terminal():
  """`--players=human,random`: the game and the legal moves are shown, the
  typed moves are played (a wrong one is asked again), the table follows."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  typed = '\n'.join(['x', 'Pass'] + ['0'] * 20) + '\n'
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.play', '--env=openspiel:kuhn_poker',
       '--players=human,random', '--games=1'], input=typed,
      capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
  out = result.stdout
  assert 'You are player ' in out and 'Your moves: 0=Pass, 1=Bet' in out
  assert "'x' is not a legal move; type one of 0, 1" in out
  assert out.count('--- game ') == 2                 # One game per seat.
  assert 'human' in out.splitlines()[-1]             # The results table.


def test_a_human_player_stops_at_the_end_of_input():
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.play', '--env=openspiel:kuhn_poker',
       '--players=human,random', '--games=1'], input='',
      capture_output=True, text=True, timeout=120)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      'repertory.play: stopped (end of input).')


def _league_run(directory, biases):
  """A `--league` run's league: one MLP snapshot per head bias, on the
  seat's flat view (Kuhn's 11 information-state numbers, 2 legal bits)."""
  league = league_lib.League(str(directory / 'league'), None)
  store = league_lib.WeightStore(str(directory / 'league' / 'weights'))
  for version, bias in enumerate(biases):
    player = league.add_player(None, version, version)
    store.save(player, {'policy': {
        'torso/mlp/layers/0/w': np.zeros((13, 4), np.float32),
        'torso/mlp/layers/0/b': np.zeros(4, np.float32),
        'head/policy/w': np.zeros((4, 2), np.float32),
        'head/policy/b': np.asarray(bias, np.float32)}})
  league.save()
  return directory


def test_the_pool_plays_one_snapshot_per_game(tmp_path):
  run = _league_run(tmp_path, [[20.0, 0.0], [0.0, 20.0]])  # Pass; bet.
  env = environments.make('openspiel:kuhn_poker', seed=0)
  player = play.make_player(f'pool:{run}', env, 0, False)
  first_moves = []
  for _ in range(300):
    player.new_game()
    timestep = env.reset()
    moves = {player(env, timestep, 0) for _ in range(5)}
    assert len(moves) == 1  # One snapshot plays the whole game.
    first_moves.append(moves.pop())
  assert 0.4 < np.mean(first_moves) < 0.6
  # A snapshot of the run alone, from its weights file.
  alone = play.make_player(f'run:{run}@main@v1', env, 0, False)
  assert alone(env, env.reset(), 0) == 1
  rows = play.play(env, [player, play.make_player('random', env, 1, False)],
                   50)
  assert sum(r['games'] for r in rows) == 100


def test_the_pool_average_exports_as_a_tabular_policy(tmp_path):
  import json  # pylint: disable=g-import-not-at-top
  run = _league_run(tmp_path, [[20.0, 0.0], [0.0, 20.0]])
  out = str(tmp_path / 'pool.json')
  value = play.export_table(f'pool:{run}', 'openspiel:kuhn_poker', out)
  with open(out) as f:
    exported = json.load(f)
  assert exported['exploitability'] == pytest.approx(value)
  policy = exported['policy']
  assert len(policy) == 12  # Kuhn's information states.
  # Player 0's first move with any card: half the games bet (snapshot 1).
  for probs in (policy['0'], policy['1'], policy['2']):
    np.testing.assert_allclose(probs, [0.5, 0.5], atol=1e-6)
  # Player 0 reaches pass-bet only under the passing snapshot: it passes.
  np.testing.assert_allclose(policy['0pb'], [1.0, 0.0], atol=1e-6)
  with pytest.raises(ValueError, match='no league in'):
    play.make_player(f'pool:{tmp_path / "none"}', environments.make(
        'openspiel:kuhn_poker'), 0, False)
