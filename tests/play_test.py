"""`repertory.play`: players from specs, the seatings, and saved policies
read back from learner checkpoints and league snapshots."""

import numpy as np
import pytest
import tensorflow as tf

from repertory import environments
from repertory import play
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
  weights = play._checkpoint_weights(store.latest().path)
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


@pytest.mark.parametrize('spec, match', [
    ('alphazero', "Unknown player spec 'alphazero'"),
    ('mcts:many', 'write mcts:<simulations>'),
    ('run:/nonexistent', 'no run directory'),
])
def test_bad_player_specs(spec, match):
  env = environments.make('openspiel:kuhn_poker', seed=0)
  with pytest.raises(ValueError, match=match):
    play.make_player(spec, env, 0, False)


def test_a_run_plays_only_the_game_view_it_was_trained_on(tmp_path):
  run = tmp_path / 'run'
  run.mkdir()
  (run / 'config.json').write_text(
      '{"experiment": {"env": "openspiel:connect_four/relative"}}')
  play.check_run_env(f'run:{run}', 'openspiel:connect_four/relative')
  play.check_run_env(f'run:{run}@main@v3', 'openspiel:connect_four/relative')
  play.check_run_env('mcts:100', 'openspiel:connect_four')
  with pytest.raises(ValueError, match=r"trained on --env='openspiel:connect_"
                     r"four/relative'; play it with --env=openspiel:connect_"
                     r"four/relative, not 'openspiel:connect_four'"):
    play.check_run_env(f'run:{run}@main@v3', 'openspiel:connect_four')
