"""Synchronous PPO: config checks, the round barrier, a test_mt smoke test."""

import time

import numpy as np
import pytest
import tree

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import ppo
from repertory.agents.ppo import acting
from repertory.agents.ppo import learning
from repertory.agents.ppo import program as program_lib
from repertory.agents.actor_critic import rounds

CATCH = experiment_lib.environment_spec('catch')
TINY = dict(unroll_length=5, num_epochs=2, num_minibatches=2,
            hidden_sizes=(16,), round_timeout_s=300.0)


@pytest.mark.parametrize('field, value', [
    ('unroll_length', 0), ('num_epochs', 0), ('clip_epsilon', 0.0),
    ('gae_lambda', 1.5), ('value_clip_epsilon', -0.1), ('hidden_sizes', ()),
    ('entropy_cost', -1.0)])
def test_config_rejects_bad_values(field, value):
  with pytest.raises(ValueError, match=field):
    ppo.Config(**{field: value})


def test_config_derived_sizes():
  config = ppo.Config(unroll_length=16, num_minibatches=4)
  assert config.items_per_round(3, 2) == 6
  assert config.steps_per_round(3, 2) == 96
  assert config.minibatch_size(3, 2) == 24


@pytest.fixture
def queue_server():
  config = ppo.Config(**TINY)
  with testing.reverb_server(
      program_lib.make_tables(config, CATCH, 2, 2)) as client:
    yield config, client


def _learner(config, client, num_actors=2):
  return learning.make_learner(config, CATCH, client, acting.QUEUE,
                               num_actors=num_actors, envs_per_actor=2)


def _actor(actor_id, config, client, learner):
  return acting.PPOActor(actor_id, config, 'catch', 2, seed=actor_id,
                         replay=client, learner=learner)


def test_round_timeout_names_missing_actor(queue_server):
  config, client = queue_server
  config.round_timeout_s = 1.5
  learner = _learner(config, client)
  actor = _actor(0, config, client, learner)
  actor.collect_round(actor.wait_for_round(None))  # Actor 1 never acts.
  with pytest.raises(rounds.RoundTimeoutError,
                     match=r'version 0.*missing items from actors \[1\]'):
    learner.step()


def test_unroll_of_another_version_never_enters_a_batch(queue_server):
  config, client = queue_server
  learner = _learner(config, client, num_actors=1)
  actor = _actor(0, config, client, learner)
  actor.wait_for_round(None)  # Holds version 0's weights, and then
  actor.collect_round(version=3)  # pretends to act with a future version.
  with pytest.raises(rounds.PolicyLagError, match='version 3'):
    learner.step()


def test_rounds_by_hand_have_lag_zero(queue_server):
  config, client = queue_server
  learner = _learner(config, client, num_actors=2)
  actors = [_actor(i, config, client, learner) for i in range(2)]
  for round_index in range(3):
    for actor in actors:
      wanted = None if actor.version is None else actor.version + 1
      assert actor.wait_for_round(wanted) == round_index
      actor.collect_round(round_index)
    metrics = learner.step()
    assert metrics['charts/policy_lag_max'] == 0
    assert metrics['learner/version'] == round_index + 1
    assert metrics['charts/learning_rate'] == pytest.approx(
        config.learning_rate)  # No annealing unless asked for.
    # Before the first update the learner's policy is the behaviour policy.
    assert metrics['charts/first_minibatch_kl'] == pytest.approx(0, abs=1e-5)
  # An actor that asks for a version the learner has not published waits,
  # then gives up with an error naming it.
  config.round_timeout_s = 0.5
  with pytest.raises(TimeoutError, match='version 5'):
    actors[0].wait_for_round(5)


def test_a_round_of_batched_items_is_the_round_of_one_item_per_unroll():
  """The same actors' round read from items of one actor's unrolls
  ([N, T + 1, ...], the default) and from one item per unroll."""
  collected = []
  for batched in (False, True):
    config = ppo.Config(**TINY, batched_items=batched)
    with testing.reverb_server(
        program_lib.make_tables(config, CATCH, 2, 2)) as client:
      learner = _learner(config, client)
      for actor_id in (1, 0):  # Read back sorted by actor.
        actor = _actor(actor_id, config, client, learner)
        actor.collect_round(actor.wait_for_round(None))
      assert client.server_info()[acting.QUEUE].current_size == (
          2 if batched else 4)
      collector = rounds.RoundCollector(
          client, acting.QUEUE, 2, 1 if batched else 2, 30.0,
          envs_per_item=2 if batched else None)
      collected.append(collector.collect(0, lambda: False))
  one_per_unroll, batched_round = collected
  assert one_per_unroll['observation'].shape[:2] == (TINY['unroll_length']
                                                      + 1, 4)
  np.testing.assert_array_equal(one_per_unroll['actor_id'], [0, 0, 1, 1])
  expected = dict(tree.flatten_with_path(one_per_unroll))
  got = dict(tree.flatten_with_path(batched_round))
  assert sorted(got) == sorted(expected)
  for path, column in expected.items():
    assert np.asarray(got[path]).dtype == np.asarray(column).dtype, path
    np.testing.assert_array_equal(got[path], column, err_msg=str(path))


def test_a_stale_batched_item_counts_its_unrolls_as_dropped(queue_server):
  config, client = queue_server
  assert config.batched_items  # The default.
  learner = _learner(config, client, num_actors=1)
  actor = _actor(0, config, client, learner)
  actor.wait_for_round(None)
  actor.collect_round(0)  # A round the learner has moved past, then
  actor.collect_round(1)  # the round it waits for (tagged by hand).
  collector = rounds.RoundCollector(client, acting.QUEUE, 1, 1, 30.0,
                                    envs_per_item=2)
  batch = collector.collect(1, lambda: False)
  np.testing.assert_array_equal(batch['policy_version'], [1, 1])
  assert collector.take_dropped() == 2  # Unrolls, not items.


def test_smoke_test_mt(tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='ppo', env='catch', num_actors=2, envs_per_actor=2,
      max_actor_steps=10**9, logdir=str(tmp_path), launch_type='test_mt')
  program = ppo.make_program(ppo.Config(**TINY), experiment)
  learner_node, = program.groups['learner']
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt')
  try:
    learner = learner_node.create_handle().dereference()
    counter = program.groups['counter'][0].create_handle().dereference()
    for round_index in range(3):
      metrics = learner.step()
      assert metrics['learner/version'] == round_index + 1
      assert metrics['charts/policy_lag_max'] == 0   # Lag 0 in every batch.
    assert learner.get_variables(['policy']).version == 3
    counts = {}
    for _ in range(50):  # Counter increments travel as futures.
      counts = counter.get_counts()
      if counts.get('policy_lag_items', 0) == 3 * 4:
        break
      time.sleep(0.1)
    assert counts['policy_lag_items'] == 3 * 4
    assert counts['policy_lag_sum'] == 0
    assert counts['learner_steps'] == 3 * 2 * 2
    assert counts['actor_steps'] >= 3 * 2 * 2 * 5
  finally:
    launched.stop(timeout=60)


@pytest.mark.slow
def test_learns_catch_local_mt(tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='ppo', env='catch', num_actors=2, envs_per_actor=8,
      max_actor_steps=150_000, stop_at_return=0.95, eval_episodes=50,
      logdir=str(tmp_path), launch_type='local_mt',
      progress_every_seconds=2.0)
  program = ppo.make_program(ppo.Config(), experiment)
  launch.launch(program, launch_type='local_mt')
  import json  # pylint: disable=g-import-not-at-top
  with open(tmp_path / 'results.json') as f:
    results = json.load(f)
  assert results['eval_return_mean'] >= 0.9
  assert results['policy_lag_mean'] == 0
  assert np.isfinite(results['actor_steps_per_second'])


def test_a_republished_version_replaces_the_round_in_flight(
    queue_server, tmp_path, caplog):
  # A rollback here; a league exploiter's restart republishes alike.
  config, client = queue_server
  learner = learning.make_learner(config, CATCH, client, acting.QUEUE,
                                  num_actors=1, envs_per_actor=2,
                                  logdir=str(tmp_path))
  actor = _actor(0, config, client, learner)
  actor.collect_round(actor.wait_for_round(None))
  assert learner.step()['learner/version'] == 1
  actor.collect_round(actor.wait_for_round(1))
  round_one = learner.algorithm.fetch(1)
  assert learner.rollback() == 2  # Before round 1's update: it is stale.
  assert learner.update(*round_one) is None
  assert 'dropped the round of version 1: it now serves version 2' in (
      caplog.text)
  assert learner.rollback() == 3
  assert actor.wait_for_round(2) == 3  # The actor asked for 2: it gets 3.
  actor.collect_round(3)
  batch, = learner.algorithm.fetch(2)  # A round of 2 moves on to 3.
  assert set(batch['policy_version']) == {3}
  metrics = learner.update(batch)
  assert metrics['charts/policy_lag_max'] == 0
  assert metrics['learner/version'] == 4
