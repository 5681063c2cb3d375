"""IMPALA: config validation, learner and actor by hand, the program in
test_mt (learner stepped by hand), and a slow learning
test on catch."""

import contextlib
import dataclasses
import json
import os

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import impala
from repertory.agents.impala import acting
from repertory.agents.actor_critic import learning
from repertory.agents.actor_critic import networks
from repertory.agents.actor_critic import tables

TABLE = tables.TABLE
CATCH = experiment_lib.environment_spec('catch')

TINY = dict(unroll_length=5, batch_size=4, max_queue_size=16,
            hidden_sizes=(16,), lstm_size=8, learner_log_every=1)


@pytest.mark.parametrize('field, value, message', [
    ('unroll_length', 0, 'unroll_length must be a positive int'),
    ('discount', 1.5, r'discount must be in \[0, 1\]'),
    ('batched_env_kind', 'gpu', "choose one of"),
    ('max_policy_lag', -1, 'max_policy_lag must be >= 0'),
    ('batch_size', 100, 'exceeds max_queue_size'),
    ('hidden_sizes', (), 'hidden_sizes must be a non-empty'),
    ('activation', 'gelu', r"choose one of \('relu', 'tanh'\)"),
    ('weights_transport', 'ray', r"choose one of \('tcp', 'handle'\)"),
    ('pg_advantage', 'td', r"pg_advantage='td'; choose one of "
     r"\('vtrace', 'gae'\)"),
    ('learning_rate_anneal_steps', -1, 'learning_rate_anneal_steps must be'),
    ('anneal_ppo_clip', True, 'anneal_ppo_clip=True needs ppo_clip and '
     'learning_rate_anneal_steps set, got ppo_clip=None'),
])
def test_config_rejects_bad_values(field, value, message):
  with pytest.raises(ValueError, match=message):
    impala.Config(**{field: value})


def test_config_sequence_length():
  assert impala.Config(unroll_length=7).sequence_length == 8


def test_separate_value_torso_is_feedforward_only():
  with pytest.raises(ValueError, match='shared_torso=False is for feedforward'):
    impala.Config(use_lstm=True, shared_torso=False)
  shared = networks.make_network(impala.Config(hidden_sizes=(8,)),
                                 CATCH.observations, CATCH.actions)
  separate = networks.make_network(
      impala.Config(hidden_sizes=(8,), shared_torso=False, activation='tanh'),
      CATCH.observations, CATCH.actions)
  # A second (value) torso: one more weight matrix and bias.
  assert len(separate.trainable_variables) == len(
      shared.trainable_variables) + 2


def test_continuous_actions_are_refused_with_a_clear_error():
  from dm_env import specs as dm_specs  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match='single discrete action'):
    networks.num_actions(dm_specs.BoundedArray((2,), np.float32, -1., 1.))


NUM_ENVS = 4  # The hand-run actor's environments.


@pytest.fixture
def catch_replay():
  """make(config[, envs_per_actor]) -> a client of a real Reverb server with
  the queue."""
  with contextlib.ExitStack() as stack:
    yield lambda config, envs_per_actor=NUM_ENVS: stack.enter_context(
        testing.reverb_server(tables.make_tables(
            config, CATCH, envs_per_actor=envs_per_actor)))


def wait_for_size(client, size):
  """Waits for the adder's last (asynchronously flushed) items."""
  testing.wait_until(lambda: testing.table_size(client, TABLE) >= size,
                     f'{size} items')
  assert testing.table_size(client, TABLE) == size


def _learner(config, client, counter=None):
  return learning.make_learner(config, CATCH, client, TABLE, counter=counter)


def _act(config, client, learner, unrolls):
  """Actor 0 (4 catch environments) writes `unrolls` unrolls per
  environment to the queue; returns once they are all in it."""
  actor = acting.ImpalaActor(0, config, 'catch', NUM_ENVS, 0, learner, client,
                             TABLE)
  actor.run(num_steps=unrolls * config.unroll_length)
  wait_for_size(client, unrolls * (1 if config.batched_items else NUM_ENVS))


def test_a_queue_of_batched_items_holds_whole_items():
  """16 unrolls of 3 environments per item: 6 items (rounded up)."""
  config = impala.Config(batched_items=True, **TINY)
  [table] = tables.make_tables(config, CATCH, envs_per_actor=3)
  assert table.info.max_size == 6
  assert table.info.signature['observation'].shape == (
      3, config.unroll_length + 1) + CATCH.observations.shape
  assert table.info.signature['policy_version'].shape == (3,)
  with pytest.raises(ValueError, match='needs envs_per_actor'):
    tables.make_tables(config, CATCH)
  [per_env] = tables.make_tables(dataclasses.replace(config,
                                                     batched_items=False),
                                 CATCH, envs_per_actor=3)
  assert per_env.info.max_size == 16
  assert per_env.info.signature['policy_version'].shape == ()


@pytest.mark.parametrize('use_lstm, batched_items', [
    (False, False), (True, False), (False, True), (True, True)])
def test_learner_consumes_actor_unrolls_by_hand(catch_replay, use_lstm,
                                                batched_items):
  """With `batched_items` the learner splits each [4, T + 1] item back into
  the environments' unrolls, each with its own logits and LSTM state: the
  importance weights of the first batch are still exactly 1."""
  config = impala.Config(use_lstm=use_lstm, batched_items=batched_items,
                         **TINY)
  client = catch_replay(config)
  learner = _learner(config, client)
  _act(config, client, learner, unrolls=3)  # 3 unrolls x 4 envs.
  first = learner.step()
  # On-policy at version 0: importance weights are exactly 1 (the behaviour
  # logits, recurrent state and resets of the actor match the learner's).
  assert first['charts/mean_rho'] == pytest.approx(1.0, abs=1e-5)
  assert first['charts/policy_lag'] == 0.0
  second = learner.step()
  assert second['charts/policy_lag'] == 1.0  # Written with version 0.
  assert learner.version == 2
  version, _ = learner.get_variables([networks.POLICY])
  assert version == 2
  assert np.isfinite(second['losses/total'])


def test_stale_unrolls_are_dropped_and_counted(catch_replay):
  config = impala.Config(max_policy_lag=0, **TINY)
  client = catch_replay(config)
  learner = _learner(config, client)
  _act(config, client, learner, unrolls=2)  # 8 unrolls of version 0.
  learner.step()  # Version 0 unrolls, lag 0: kept; version -> 1.
  metrics = learner.step()  # Version 0 unrolls now lag 1 > 0: dropped.
  assert metrics['charts/dropped_stale'] == 4
  assert learner.version == 1  # No update from a fully dropped batch.


def test_a_partial_batch_is_learned_from_not_lost(catch_replay):
  # batch_size 4, but the queue holds 3 unrolls: after the 1 s rate-limiter
  # timeout the learner trains on the 3 (padded, padding masked) instead of
  # dropping unrolls that already left the queue.
  config = impala.Config(**TINY)
  client = catch_replay(config, envs_per_actor=3)
  learner = _learner(config, client)
  actor = acting.ImpalaActor(0, config, 'catch', 3, 0, learner, client,
                             TABLE)
  actor.run(num_steps=config.unroll_length)  # 1 unroll x 3 envs: 1 item.
  wait_for_size(client, 1)
  metrics = learner.step()
  assert learner.version == 1
  assert metrics['charts/dropped_stale'] == 0
  assert metrics['charts/policy_lag_histogram'].shape == (3,)
  assert metrics['charts/mean_rho'] == pytest.approx(1.0, abs=1e-5)
  assert client.server_info()[TABLE].current_size == 0
  # The queue runs dry (the dataset ends), then a new dataset: same trace.
  assert learner.step() is None
  actor.run(num_steps=config.unroll_length)
  wait_for_size(client, 1)
  assert learner.step()['charts/policy_lag'] == 1.0
  assert learner.algorithm._train_step.function.experimental_get_tracing_count() == 1  # pylint: disable=protected-access


def test_learning_rate_anneals_linearly_to_zero(catch_replay):
  # B * T = 20 actor steps per update, annealed over 60: update k (0-based)
  # uses 1e-2 * max(0, 1 - 20 (k + 1) / 60) = 2/3, 1/3, 0, 0 of 1e-2.
  config = impala.Config(learning_rate=1e-2, learning_rate_anneal_steps=60,
                         **TINY)
  client = catch_replay(config)
  learner = _learner(config, client)
  _act(config, client, learner, unrolls=4)  # 4 unrolls x 4 envs.
  algorithm = learner.algorithm
  for k in range(4):
    before = [v.numpy() for v in algorithm.network.trainable_variables]
    metrics = learner.step()
    expected = 1e-2 * max(0.0, 1.0 - 20 * (k + 1) / 60)
    assert metrics['charts/learning_rate'] == pytest.approx(expected)
    assert float(algorithm.optimizer.learning_rate.numpy()) == (
        pytest.approx(expected))
    after = [v.numpy() for v in algorithm.network.trainable_variables]
    moved = any(not np.array_equal(b, a) for b, a in zip(before, after))
    assert moved == (expected > 0)  # Adam takes the variable's value.
  assert learner.version == 4


def test_ppo_clip_anneals_with_the_learning_rate(catch_replay):
  # The same fractions as the learning rate's above: 2/3, 1/3, 0 of 0.3.
  config = impala.Config(learning_rate=1e-2, learning_rate_anneal_steps=60,
                         ppo_clip=0.3, anneal_ppo_clip=True, **TINY)
  client = catch_replay(config)
  learner = _learner(config, client)
  _act(config, client, learner, unrolls=3)
  for k in range(3):
    metrics = learner.step()
    expected = 0.3 * max(0.0, 1.0 - 20 * (k + 1) / 60)
    assert metrics['charts/ppo_clip'] == pytest.approx(expected)
    assert metrics['charts/learning_rate'] == pytest.approx(expected / 30)
  # Without anneal_ppo_clip the clip stays and is not logged.
  steady = learning.VTrace(dataclasses.replace(config, anneal_ppo_clip=False),
                           CATCH, replay=None, table=TABLE)
  assert steady._ppo_clip.value == 0.3  # pylint: disable=protected-access
  assert steady._ppo_clip.update(5) == {}  # pylint: disable=protected-access


def test_learning_rate_is_constant_by_default(catch_replay):
  config = impala.Config(learning_rate=1e-2, **TINY)
  client = catch_replay(config)
  learner = _learner(config, client)
  assert learner.algorithm.optimizer.learning_rate == 1e-2  # A float.
  _act(config, client, learner, unrolls=1)
  assert 'charts/learning_rate' not in learner.step()


def _experiment(tmp_path, agent, **kwargs):
  values = dict(agent=agent, env='catch', num_actors=2, envs_per_actor=2,
                max_actor_steps=10_000_000, eval_episodes=2,
                final_eval_episodes=2, eval_fraction=1.0,
                logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


@pytest.mark.parametrize('batched_items', [False, True])
def test_program_in_test_mt_learner_by_hand(tmp_path, batched_items):
  config = impala.Config(batched_items=batched_items, **TINY)
  experiment = _experiment(tmp_path, 'impala')
  program = impala.make_program(config, experiment)
  assert set(program.groups) == {'replay', 'counter', 'learner', 'monitor',
                                 'evaluator', 'actor'}
  assert len(program.groups['actor']) == 2
  versions, counts = testing.step_program_by_hand(
      program, program.groups['learner'][0])
  assert versions == [1, 2, 3, 4, 5]
  assert counts['learner_steps'] >= 5
  assert counts['policy_lag_items'] >= 5 * config.batch_size
  assert counts['policy_lag_sum'] >= 0
  assert counts['actor_steps'] > 0


def test_program_runs_to_its_budget_and_writes_results(tmp_path):
  config = impala.Config(**TINY)
  experiment = _experiment(tmp_path, 'impala', max_actor_steps=400)
  program = impala.make_program(config, experiment)
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=240)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['agent'] == 'impala' and results['env'] == 'catch'
  assert results['actor_steps'] >= 400
  assert results['learner_steps'] >= 1
  assert results['policy_lag_mean'] is not None
  assert results['eval_episodes'] == 2
  assert -1.0 <= results['eval_return_mean'] <= 1.0


@pytest.mark.slow
def test_impala_solves_catch_in_local_mt(tmp_path):
  experiment = _experiment(tmp_path, 'impala', envs_per_actor=8,
                           max_actor_steps=300_000, stop_at_return=0.95,
                           eval_episodes=20, launch_type='local_mt',
                           progress_every_seconds=5.0)
  program = impala.make_program(impala.Config(), experiment)
  launch.launch(program, launch_type='local_mt', termination_notice_secs=5)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['eval_return_mean'] >= 0.9, results
