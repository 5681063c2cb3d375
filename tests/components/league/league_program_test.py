"""A league around an agent the league code has never heard of: the example
custom agent (examples/custom_agent.py) in a league on OpenSpiel's
tic-tac-toe, with real Reverb and the real league node, wins more against a
random player after training than before."""

import functools
import json
import os

import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.components import league

EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                        'examples')


def _a2c():
  return testing.import_script(os.path.join(EXAMPLES, 'custom_agent.py'),
                               'league_custom_agent')


def _experiment(tmp_path, **kwargs):
  values = dict(agent='a2c', env='openspiel:tic_tac_toe', num_actors=1,
                envs_per_actor=8, max_actor_steps=30_000,
                stop_at_return='never', eval_episodes=20,
                eval_every_steps=10_000, logdir=str(tmp_path),
                launch_type='test_mt', progress_every_seconds=2.0)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


def _score_of_snapshot(a2c, config, logdir, player, games=2000):
  """Mean return of snapshot `player` (from the league's weights) in the
  alternating seat against random, played as the run monitor plays."""
  from repertory.components import actors  # pylint: disable=g-import-not-at-top
  from repertory.components import networks  # pylint: disable=g-import-not-at-top
  from repertory.components.evaluation import evaluator  # pylint: disable=g-import-not-at-top
  env = league.against_random_seat('openspiel:tic_tac_toe', seed=7)
  spec = experiment_lib.environment_spec(
      lambda seed=0: league.against_random_seat('openspiel:tic_tac_toe', seed))
  make = functools.partial(networks.mlp_policy_value_network, spec,
                           config.hidden_sizes)
  template = {'policy': networks.get_variables(make())}
  variables = league.WeightStore(
      os.path.join(logdir, 'league', 'weights')).load(player, template)
  actor = actors.FeedForwardActor(make, league.FrozenSource(0, variables))
  actor.update(wait=True)
  return evaluator.evaluate(env, actor, games).return_mean


def test_rejects_an_unknown_rule_and_a_single_agent_game(tmp_path):
  a2c = _a2c()
  with pytest.raises(ValueError, match="--league='best'; choose one of"):
    league.make_program(a2c.make_program, a2c.Config(),
                        _experiment(tmp_path), matchmaking='best')
  with pytest.raises(ValueError, match='catch.* single-agent'):
    league.make_program(a2c.make_program, a2c.Config(),
                        _experiment(tmp_path, env='catch'))
  with pytest.raises(ValueError, match='--league_exploitability: .*tic_tac_'
                     'toe.* has over 100000 histories') as error:
    league.make_program(a2c.make_program, a2c.Config(),
                        _experiment(tmp_path), exploitability=True)
  assert '\n' not in str(error.value)
  with pytest.raises(ValueError, match='--league_rated_games=1: expected 0'):
    league.make_program(a2c.make_program, a2c.Config(),
                        _experiment(tmp_path), rated_games=1)
  assert not os.listdir(tmp_path)  # Nothing written.


def test_the_program_is_the_agents_own_plus_a_league(tmp_path):
  a2c = _a2c()
  program = league.make_program(a2c.make_program, a2c.Config(),
                                _experiment(tmp_path))
  assert set(program.groups) == {'replay', 'counter', 'learner', 'monitor',
                                 'evaluator', 'actor', 'league'}
  # Tic-tac-toe is too large to traverse: its snapshots are rated from
  # sampled games, and the run monitor reads the rating from the league.
  [node] = program.groups['league']
  kwargs = node.arguments()[1]
  assert kwargs['exploitability'] is None
  assert kwargs['rating_game'] == 'openspiel:tic_tac_toe'
  assert kwargs['rated_games'] == 50
  [monitor] = program.groups['monitor']
  assert monitor.arguments()[1]['metrics_source'] is not None


@pytest.mark.parametrize('rule, given, every', [
    ('latest', None, 20), ('pfsp', None, 200), ('latest', 7, 7)])
def test_latest_snapshots_often_unless_told(tmp_path, rule, given, every):
  # With 'latest' the opponent is the newest snapshot: it lags behind the
  # learner by up to the snapshot interval.
  a2c = _a2c()
  program = league.make_program(a2c.make_program, a2c.Config(),
                                _experiment(tmp_path), matchmaking=rule,
                                snapshot_every_versions=given)
  [node] = program.groups['league']
  assert node.arguments()[1]['snapshot_every_versions'] == every


def test_a_league_on_kuhn_poker_reports_exploitability(tmp_path):
  a2c = _a2c()
  config = a2c.Config(unroll_length=5, batch_size=4, max_queue_size=16)
  program = league.make_program(
      a2c.make_program, config,
      _experiment(tmp_path, env='openspiel:kuhn_poker', max_actor_steps=3000,
                  eval_every_steps=1500, progress_every_seconds=0.5),
      matchmaking='uniform', snapshot_every_versions=20)
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=300)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert 0 < results['exploitability'] < 3  # Kuhn's payoffs are in [-2, 2].
  assert 0 < results['exploitability_pool'] < 3
  assert results['exploitability_snapshots'] >= 1
  assert results['exploitability_version'] == results['learner_version']
  import csv  # pylint: disable=g-import-not-at-top
  with open(os.path.join(tmp_path, 'progress.csv')) as f:
    rows = [r for r in csv.DictReader(f) if r.get('exploitability')]
  assert len(rows) >= 2  # As it goes, and the final one.
  with open(os.path.join(tmp_path, 'progress.log')) as f:
    assert 'exploitability_pool=' in f.read()


@pytest.mark.slow  # A minute or two alone.
def test_custom_agent_in_a_league_wins_more_against_random(tmp_path):
  a2c = _a2c()
  config = a2c.Config(unroll_length=10, batch_size=8, max_queue_size=32,
                      learning_rate=3e-3)
  program = league.make_program(a2c.make_program, config,
                                _experiment(tmp_path), matchmaking='pfsp',
                                snapshot_every_versions=50)
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=900)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  first = _score_of_snapshot(a2c, config, tmp_path, 'main@v0')
  final = results['eval_return_mean']
  assert results['eval_episodes'] >= league.MIN_EVAL_GAMES
  assert results['league'] == 'pfsp'
  assert final > first + 0.2, (first, final)
  # Rated from sampled games against the pool, above the initial weights.
  assert results['elo_anchored'] > 1000.0
  assert results['elo_anchored_version'] == results['learner_version']
  with open(os.path.join(tmp_path, 'league', 'league.json')) as f:
    state = json.load(f)
  assert len(state['players']) >= 2 and state['games'] > 100
  weights = os.listdir(os.path.join(tmp_path, 'league', 'weights'))
  assert len(weights) == len(state['players'])
