"""IMPALA and PPO in a league on Kuhn poker (real OpenSpiel, Reverb and the
league node, test_mt): each runs its own program and learner, and the league
fills with snapshots of its weights and the games against them."""

import json
import os

import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import impala
from repertory.agents import ppo
from repertory.components import league


def _experiment(tmp_path, agent):
  return experiment_lib.ExperimentConfig(
      agent=agent, env='openspiel:kuhn_poker', num_actors=1, envs_per_actor=4,
      max_actor_steps=3_000, stop_at_return='never', eval_episodes=20,
      eval_every_steps=0, logdir=str(tmp_path), launch_type='test_mt',
      progress_every_seconds=1.0)


@pytest.mark.parametrize('agent, config', [
    (impala, impala.Config(unroll_length=5, batch_size=4, max_queue_size=16,
                           hidden_sizes=(16,))),
    (ppo, ppo.Config(unroll_length=5, num_epochs=2, num_minibatches=2,
                     hidden_sizes=(16,))),
])
def test_an_agent_runs_its_own_program_in_a_league(tmp_path, agent, config):
  name = agent.__name__.rsplit('.', 1)[1]
  program = league.make_program(agent.make_program, config,
                                _experiment(tmp_path, name),
                                matchmaking='pfsp', snapshot_every_versions=5)
  assert 'league' in program.groups and 'learner' in program.groups
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=600)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['agent'] == name and results['league'] == 'pfsp'
  assert results['env'] == 'openspiel:kuhn_poker'
  assert results['eval_episodes'] >= league.MIN_EVAL_GAMES
  assert results['learner_steps'] >= 10
  with open(os.path.join(tmp_path, 'league', 'league.json')) as f:
    state = json.load(f)
  assert len(state['players']) >= 2, state['players']
  assert state['games'] > 0
  assert os.path.isdir(os.path.join(tmp_path, 'checkpoints'))
