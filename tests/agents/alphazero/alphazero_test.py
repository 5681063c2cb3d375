"""The alphazero agent: config checks, the games it refuses, a short test_mt
run whose checkpoints `repertory.play` plays, and (slow) learning
tic-tac-toe against a random player."""

import time

import pytest

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import play
from repertory import testing
from repertory.agents import alphazero
from repertory.components import league
from repertory.components import variables
from repertory.components.evaluation import evaluator

GAME = 'openspiel:tic_tac_toe'


def test_config_rejects_bad_values():
  with pytest.raises(ValueError, match='simulations must be >= 1, got 0'):
    alphazero.Config(simulations=0)
  with pytest.raises(ValueError, match=r'batch_size \(256\) <= min_replay_size '
                     r'\(100\)'):
    alphazero.Config(min_replay_size=100)
  with pytest.raises(ValueError, match='dirichlet_epsilon must be in'):
    alphazero.Config(dirichlet_epsilon=1.5)
  with pytest.raises(ValueError, match='samples_per_insert must be > 0'):
    alphazero.Config(samples_per_insert=0.0)


@pytest.mark.parametrize('env, match', [
    ('openspiel:kuhn_poker', 'perfect information and no chance'),
    ('catch', 'plays OpenSpiel games'),
])
def test_refuses_games_it_cannot_search(env, match, tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='alphazero', env=env, logdir=str(tmp_path))
  with pytest.raises(ValueError, match=match):
    alphazero.make_program(alphazero.Config(), experiment)
  assert not list(tmp_path.iterdir())  # Refused before anything is written.


def test_refuses_convolutions_where_there_is_no_board(tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='alphazero', env='openspiel:mancala', logdir=str(tmp_path))
  with pytest.raises(ValueError, match=(
      r"conv_channels=\(8,\) convolves board planes \[C, H, W\]; "
      r"'openspiel:mancala' gives observations of shape \(16,\); set "
      r"--config.conv_channels='\(\)' for an MLP\.$")):
    alphazero.make_program(alphazero.Config(conv_channels=(8,)), experiment)
  assert not list(tmp_path.iterdir())


def _config():
  return alphazero.Config(
      simulations=20, conv_channels=(), hidden_sizes=(64,), batch_size=64,
      min_replay_size=256, replay_size=20_000)


def _launch(tmp_path, config):
  experiment = experiment_lib.ExperimentConfig(
      agent='alphazero', env=GAME, num_actors=1, max_actor_steps=10**9,
      logdir=str(tmp_path), launch_type='test_mt')
  program = alphazero.make_program(config, experiment)
  return program, testing.launched(program)


def test_learns_from_its_search_and_play_reads_the_run(tmp_path):
  program, launched = _launch(tmp_path, _config())
  with launched:
    learner = program.groups['learner'][0].create_handle().dereference()
    deadline = time.monotonic() + 120
    while (learner.get_variables(['policy']).version < 20 and
           time.monotonic() < deadline):
      time.sleep(0.2)
    assert learner.get_variables(['policy']).version >= 20
  env = environments.make(GAME, seed=0)
  players = [play.make_player(f'search:8:run:{tmp_path}', env, 0, False),
             play.make_player(f'run:{tmp_path}', env, 1, True)]
  rows = play.play(env, players, 2)  # Its checkpoint, searching or not.
  assert [r['games'] for r in rows] == [2, 2]


def _return_vs_random(weights, games=600):
  actor = league.EvalActor(variables.VariableStore({'policy': weights}),
                           greedy=True)
  actor.update(wait=True)
  return evaluator.evaluate(league.against_random(GAME, 7), actor,
                            games).return_mean


@pytest.mark.slow  # A learning test: its margin is not kept on a loaded machine.
def test_raises_the_return_against_random(tmp_path):
  program, launched = _launch(tmp_path, _config())
  with launched:
    learner = program.groups['learner'][0].create_handle().dereference()
    first = learner.get_variables(['policy']).variables[0]
    deadline = time.monotonic() + 240
    while (learner.get_variables(['policy']).version < 2000 and
           time.monotonic() < deadline):
      time.sleep(1.0)
    last = learner.get_variables(['policy'])
  before, after = _return_vs_random(first), _return_vs_random(last.variables[0])
  assert last.version >= 1500, last.version
  # Random play against random scores about 0 over both seats.
  assert after > max(before, 0.0) + 0.25, (before, after)
