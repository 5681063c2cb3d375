"""PPO self-play in synchronous rounds (`--agent=ppo --selfplay=...`): every
actor plays a round with the learner's one version, the learner trains on
exactly that round, then publishes the next version. Stepped by hand in a
test_mt program with real Reverb, real actors and the real league."""

import collections
import csv
import os

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import testing
from repertory.agents import selfplay
from repertory.agents.selfplay import config as config_lib

GAME = 'openspiel:kuhn_poker'
NUM_ACTORS, BATCH = 2, 8


def test_ppo_refuses_a_server_that_pulls_its_own_weights():
  with pytest.raises(ValueError, match="policy_loss='ppo' runs synchronous "
                     'rounds'):
    selfplay.Config(policy_loss='ppo', inference='server')


def _program(tmp_path, **config):
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=GAME, num_actors=NUM_ACTORS, envs_per_actor=3,
      max_actor_steps=10**9, logdir=str(tmp_path), launch_type='test_mt')
  config = selfplay.Config(policy_loss='ppo', matchmaking='latest',
                           batch_size=BATCH, hidden_sizes=(16,),
                           exploration=0.0, **config)
  program = selfplay.make_program(config, experiment)
  learner_node = program.groups['learner'][0]
  learner_node.disable_run()  # Stepped by hand.
  return program, learner_node


def test_the_queue_holds_one_round_of_one_version(tmp_path):
  program, learner_node = _program(tmp_path)
  with testing.launched(program):
    replay = program.groups['replay'][0].create_handle().dereference()
    # The actors play round 0 and wait for version 1, which the learner
    # (not stepped) never publishes: the queue holds exactly round 0.
    testing.wait_until(
        lambda: testing.table_size(replay, config_lib.TABLE) >=
        NUM_ACTORS * BATCH, 'round 0 on the queue', timeout=120)
    items = testing.read_queue(replay, config_lib.TABLE)
    learner = learner_node.create_handle().dereference()
    assert learner.get_variables(['policy']).version == 0
  assert len(items) == NUM_ACTORS * BATCH
  assert {int(i['policy_version']) for i in items} == {0}
  assert collections.Counter(int(i['actor_id']) for i in items) == {
      0: BATCH, 1: BATCH}


def test_rounds_have_no_lag_and_games_one_version(tmp_path):
  """Three rounds stepped by hand: the learner sees no lag and (without
  ε-exploration) its first minibatch of every round sees the behaviour
  policy itself; every game was played with one version."""
  program, learner_node = _program(tmp_path, learner_log_every=1)
  with testing.launched(program):
    learner = learner_node.create_handle().dereference()
    for version in range(3):
      assert learner.get_variables(['policy']).version == version
      learner.step()  # Waits for exactly the round of `version`.
    assert learner.get_variables(['policy']).version == 3
  with open(os.path.join(tmp_path, 'learner', 'csv', 'learner.csv')) as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 3
  for row in rows:
    assert float(row['learner/charts/policy_lag']) == 0.0
    # A Kuhn poker player moves once or twice per game.
    assert (NUM_ACTORS * BATCH <= float(row['learner/losses/samples']) <=
            2 * NUM_ACTORS * BATCH)
    assert abs(float(row['learner/losses/first_minibatch_kl'])) < 1e-5
    assert np.isfinite(float(row['learner/losses/total']))
  # Naive self-play writes both seats: BATCH / 2 games per actor and round,
  # each logged with the version it was played with.
  for actor in range(NUM_ACTORS):
    with open(os.path.join(tmp_path, 'games', f'actor_{actor}.csv')) as f:
      versions = collections.Counter(
          int(r['learner_version']) for r in csv.DictReader(f))
    assert [versions[v] for v in range(3)] == [BATCH // 2] * 3, versions
    assert set(versions) <= {0, 1, 2, 3}
