"""The NeuRD agent in a league on Kuhn poker (real OpenSpiel, Reverb and the
league node, test_mt): it refuses to run outside a league, `--seed` seeds
its network, a short run fills the league and reports games and returns,
and a second launch in the same logdir resumes the learner's step, version
and weights as every agent's does."""

import json
import math
import os

import numpy as np
import pytest
import tree

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import neurd
from repertory.agents.neurd import acting
from repertory.agents.neurd import learning
from repertory.components import checkpointing
from repertory.components import league
from repertory.components import model_store
from repertory.components.league import opponents

GAME = 'openspiel:kuhn_poker'
TINY = dict(unroll_length=4, batch_size=4, max_queue_size=16,
            hidden_sizes=(16,))


def _experiment(logdir, **kwargs):
  return experiment_lib.ExperimentConfig(**dict(dict(
      agent='neurd', env=GAME, num_actors=1, envs_per_actor=4,
      max_actor_steps=3_000, stop_at_return='never', eval_episodes=20,
      eval_every_steps=0, logdir=str(logdir), launch_type='test_mt',
      progress_every_seconds=1.0), **kwargs))


def _spec():
  """The spec of the seat an agent plays in a league (flat views)."""
  return experiment_lib.environment_spec(opponents.LeagueGame(GAME, None))


def test_refuses_to_run_outside_a_league(tmp_path):
  with pytest.raises(ValueError, match=r'--agent=neurd plays one seat of a '
                     r'two-player game .* add --league=<rule>'):
    neurd.make_program(neurd.Config(), _experiment(tmp_path))


def test_the_seed_seeds_the_network():
  spec = _spec()
  weights = lambda seed: learning.NeuRD(  # pylint: disable=g-long-lambda
      neurd.Config(**TINY), spec, None, 'queue', seed=seed
  ).policy_variables()['policy']
  same, again, other = weights(3), weights(3), weights(4)
  tree.map_structure(np.testing.assert_array_equal, same, again)
  assert any(not np.array_equal(same[k], other[k]) for k in same)


def test_acting_plays_only_legal_actions():
  spec = _spec()
  algorithm = learning.NeuRD(neurd.Config(**TINY), spec, None, 'queue')
  policy = acting.LegalPolicy(int(spec.actions.num_values), exploration=0.5)
  policy.set_weights(algorithm.policy_variables()['policy'])
  observation = np.zeros((64,) + spec.observations.shape, np.float32)
  observation[:, -2:] = [1.0, 0.0]  # Only action 0 is legal.
  action, extras, _ = policy.step(observation, (), None)
  assert (action == 0).all()
  np.testing.assert_allclose(np.exp(extras['logits'][:, 0]), 1.0, rtol=1e-6)


@pytest.mark.parametrize('policy_loss', ['neurd', 'mmd', 'a2c'])
def test_a_league_run_learns_and_reports_games(tmp_path, policy_loss):
  program = league.make_program(
      neurd.make_program, neurd.Config(policy_loss=policy_loss, **TINY),
      _experiment(tmp_path), matchmaking='pfsp', snapshot_every_versions=5)
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=600)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['agent'] == 'neurd' and results['league'] == 'pfsp'
  assert results['policy_loss'] == policy_loss
  assert results['learner_steps'] >= 10
  # Games played and their returns reach the run's progress and results.
  assert results['episodes'] > 100
  assert math.isfinite(results['episode_return_mean'])
  assert results['eval_episodes'] >= league.MIN_EVAL_GAMES
  with open(os.path.join(tmp_path, 'league', 'league.json')) as f:
    state = json.load(f)
  assert len(state['players']) >= 2 and state['games'] > 0
  assert os.path.isdir(os.path.join(tmp_path, 'snapshot'))


def _launch(logdir):
  experiment = _experiment(
      logdir, max_actor_steps=10**9,
      checkpoint=checkpointing.CheckpointSettings(every_steps=2,
                                                  every_minutes=None))
  program = league.make_program(neurd.make_program, neurd.Config(**TINY),
                                experiment, matchmaking='latest')
  learner_node = program.groups['learner'][0]
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=10)
  return launched, learner_node.create_handle().dereference()


def _steps(learner, n):
  testing.wait_until(lambda: learner.step() is not None, 'a learner step',
                     timeout=120, interval=0.0)
  for _ in range(n - 1):
    assert learner.step() is not None


def test_a_second_launch_resumes_step_version_and_weights(tmp_path):
  launched, learner = _launch(tmp_path)
  try:
    _steps(learner, 5)
    first = learner.get_variables(['policy'])
  finally:
    launched.stop(timeout=60)
  restored = model_store.ModelStore(os.path.join(tmp_path, 'checkpoints'),
                                    {}).restore()
  assert (restored.step, restored.version) == (5, first.version)

  launched, learner = _launch(tmp_path)
  try:
    assert learner.status()['learner/steps'] == 5
    resumed = learner.get_variables(['policy'])
    assert resumed.version == first.version
    tree.map_structure(np.testing.assert_array_equal, resumed.variables,
                       first.variables)
    _steps(learner, 1)
    assert learner.status()['learner/steps'] == 6
  finally:
    launched.stop(timeout=60)
