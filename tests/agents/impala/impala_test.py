"""IMPALA: config validation, learner and actor by hand, the program in
test_mt (learner stepped by hand, STYLE.md point 9), and a slow learning
test on catch."""

import json
import os
import threading
import time

import numpy as np
import pytest
import reverb

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import impala
from repertory.agents.impala import acting
from repertory.agents.impala import learning
from repertory.agents.impala import networks
from repertory.agents.impala import program as program_lib

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
])
def test_config_rejects_bad_values(field, value, message):
  with pytest.raises(ValueError, match=message):
    impala.Config(**{field: value})


def test_config_sequence_length():
  assert impala.Config(unroll_length=7).sequence_length == 8


def test_separate_value_torso_is_feedforward_only():
  with pytest.raises(ValueError, match='shared_torso=False is for feedforward'):
    impala.Config(use_lstm=True, shared_torso=False)
  observation_spec, action_spec = networks.environment_specs('catch')
  shared = networks.make_network(impala.Config(hidden_sizes=(8,)),
                                 observation_spec, action_spec)
  separate = networks.make_network(
      impala.Config(hidden_sizes=(8,), shared_torso=False, activation='tanh'),
      observation_spec, action_spec)
  # A second (value) torso: one more weight matrix and bias.
  assert len(separate.trainable_variables) == len(
      shared.trainable_variables) + 2


def test_continuous_actions_are_refused_with_a_clear_error():
  from dm_env import specs
  with pytest.raises(ValueError, match='single discrete action'):
    networks.num_actions(specs.BoundedArray((2,), np.float32, -1., 1.))


@pytest.fixture
def catch_replay():
  def make(config):
    observation_spec, action_spec = networks.environment_specs('catch')
    server = reverb.Server(program_lib.make_tables(config, observation_spec,
                                                   action_spec))
    make.servers.append(server)
    return (reverb.Client(f'localhost:{server.port}'), observation_spec,
            action_spec)
  make.servers = []
  yield make
  for server in make.servers:
    server.stop()


def wait_for_size(client, size, timeout=120):
  """Waits for the adder's last (asynchronously flushed) items."""
  deadline = time.monotonic() + timeout
  while client.server_info()[program_lib.TABLE].current_size < size:
    assert time.monotonic() < deadline, 'unrolls did not arrive'
    time.sleep(0.05)
  assert client.server_info()[program_lib.TABLE].current_size == size


@pytest.mark.parametrize('use_lstm', [False, True])
def test_learner_consumes_actor_unrolls_by_hand(catch_replay, use_lstm):
  config = impala.Config(use_lstm=use_lstm, **TINY)
  client, observation_spec, action_spec = catch_replay(config)
  learner = learning.VTraceLearner(config, observation_spec, action_spec,
                                   client, program_lib.TABLE)
  actor = acting.ImpalaActor(0, config, 'catch', 4, 0, learner, client,
                             program_lib.TABLE)
  actor.run(num_steps=3 * config.unroll_length)  # 3 unrolls x 4 envs.
  wait_for_size(client, 12)
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
  client, observation_spec, action_spec = catch_replay(config)
  learner = learning.VTraceLearner(config, observation_spec, action_spec,
                                   client, program_lib.TABLE)
  actor = acting.ImpalaActor(0, config, 'catch', 4, 0, learner, client,
                             program_lib.TABLE)
  actor.run(num_steps=2 * config.unroll_length)  # 8 unrolls of version 0.
  wait_for_size(client, 8)
  learner.step()  # Version 0 unrolls, lag 0: kept; version -> 1.
  metrics = learner.step()  # Version 0 unrolls now lag 1 > 0: dropped.
  assert metrics['charts/dropped_stale'] == 4
  assert learner.version == 1  # No update from a fully dropped batch.
  assert learner._pending['dropped_stale'] == 4  # pylint: disable=protected-access


def _set_event():
  event = threading.Event()
  event.set()
  return event


def test_a_partial_batch_is_learned_from_not_lost(catch_replay):
  # batch_size 4, but the queue holds 3 unrolls: after the 1 s rate-limiter
  # timeout the learner trains on the 3 (padded, padding masked) instead of
  # dropping unrolls that already left the queue.
  config = impala.Config(**TINY)
  client, observation_spec, action_spec = catch_replay(config)
  learner = learning.VTraceLearner(config, observation_spec, action_spec,
                                   client, program_lib.TABLE)
  actor = acting.ImpalaActor(0, config, 'catch', 3, 0, learner, client,
                             program_lib.TABLE)
  actor.run(num_steps=config.unroll_length)  # 1 unroll x 3 envs.
  wait_for_size(client, 3)
  metrics = learner.step()
  assert learner.version == 1
  assert metrics['charts/dropped_stale'] == 0
  assert learner._pending['policy_lag_items'] == 3  # pylint: disable=protected-access
  assert metrics['charts/mean_rho'] == pytest.approx(1.0, abs=1e-5)
  assert client.server_info()[program_lib.TABLE].current_size == 0
  # The queue runs dry (the dataset ends), then a new dataset: same trace.
  assert learner.step(stop=_set_event()) is None
  actor.run(num_steps=config.unroll_length)
  assert learner.step()['charts/policy_lag'] == 1.0
  assert learner._train_step.experimental_get_tracing_count() == 1  # pylint: disable=protected-access


def _experiment(tmp_path, agent, **kwargs):
  values = dict(agent=agent, env='catch', num_actors=2, envs_per_actor=2,
                max_actor_steps=10_000_000, eval_episodes=2,
                logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


def step_program_by_hand(program, learner_node, counter_label='counter',
                         num_steps=5, timeout=240):
  """Launches `program` in test_mt with the learner's run disabled, steps
  the learner by hand and returns (versions seen, counts)."""
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  try:
    learner = learner_node.create_handle().dereference()
    counter = program.groups[counter_label][0].create_handle().dereference()
    versions = []
    deadline = time.monotonic() + timeout
    for _ in range(num_steps):
      learner.step()
      versions.append(learner.get_variables([networks.POLICY]).version)
      assert time.monotonic() < deadline
    learner.flush_counts()
    counts = {}
    while time.monotonic() < deadline:
      counts = counter.get_counts()
      if counts.get('learner_steps', 0) >= num_steps and counts.get(
          'actor_steps', 0) > 0:
        break
      time.sleep(0.2)
    return versions, counts
  finally:
    launched.stop(timeout=60)


def test_program_in_test_mt_learner_by_hand(tmp_path):
  config = impala.Config(**TINY)
  experiment = _experiment(tmp_path, 'impala')
  program = impala.make_program(config, experiment)
  assert set(program.groups) == {'replay', 'counter', 'learner', 'monitor',
                                 'evaluator', 'actor'}
  assert len(program.groups['actor']) == 2
  versions, counts = step_program_by_hand(program,
                                          program.groups['learner'][0])
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
