"""SEED: config, TensorFlow-free actors, the program in test_mt (learner
stepped by hand), placement, and a slow learning test."""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import seed
from repertory.agents.seed import acting
from repertory.agents.seed import networks as seed_networks
from repertory.components import networks as components_networks
from repertory.agents.actor_critic import networks

CATCH = experiment_lib.environment_spec('catch')
TINY = dict(unroll_length=5, batch_size=4, max_queue_size=16,
            hidden_sizes=(16,), lstm_size=8, learner_log_every=1)


@pytest.mark.parametrize('field, value, message', [
    ('inference_placement', 'gpu', "choose one of"),
    ('num_inference_servers', 0, 'num_inference_servers must be >= 1'),
    ('max_batch_size', -1, 'max_batch_size must be >= 0'),
    ('inference_transport', 'grpc', "choose one of \\('tcp', 'handle'\\)"),
    ('unroll_length', 0, 'unroll_length must be a positive int'),
    ('env_groups', 0, 'env_groups must be >= 1, got 0'),
])
def test_config_rejects_bad_values(field, value, message):
  with pytest.raises(ValueError, match=message):
    seed.Config(**{field: value})


def test_batch_size_defaults_to_the_actors_of_a_server():
  assert seed.Config().batch_size_for(5) == 5
  two = seed.Config(num_inference_servers=2)
  assert [two.batch_size_for(5, s) for s in (0, 1)] == [3, 2]
  assert [two.batch_size_for(4, s) for s in (0, 1)] == [2, 2]
  assert seed.Config(num_inference_servers=3).batch_size_for(1, 2) == 1
  assert seed.Config(max_batch_size=4).batch_size_for(5, 0) == 4
  with pytest.raises(ValueError, match='server=2; the servers are 0 to 1'):
    two.batch_size_for(5, 2)
  # Each group of an actor is a call of its own.
  assert seed.Config(env_groups=2).batch_size_for(5) == 10
  assert seed.Config(env_groups=2, max_batch_size=4).batch_size_for(5) == 4


def test_env_groups_need_tcp_and_must_divide_the_environments(tmp_path):
  with pytest.raises(ValueError, match="env_groups=2 needs inference_transport="
                     "'tcp'.*got 'handle'"):
    seed.Config(env_groups=2, inference_transport='handle')
  with pytest.raises(ValueError,
                     match='env_groups=3 must divide envs_per_actor=2'):
    seed.make_program(seed.Config(env_groups=3, **TINY),
                      _experiment(tmp_path))


def test_seed_actor_seeds_its_groups_as_one_batch():
  whole = environments.make_batched('catch', 6, seed=11).reset()
  actor = acting.SeedActor(0, 'catch', 6, 11, server=None, env_groups=2)
  try:
    groups = actor._environment.groups  # pylint: disable=protected-access
    assert [g.num_envs for g in groups] == [3, 3]
    np.testing.assert_array_equal(
        np.concatenate([g.reset().observation for g in groups]),
        whole.observation)
  finally:
    actor.close()


def test_env_groups_are_the_servers_actors(tmp_path):
  program = seed.make_program(
      seed.Config(env_groups=2, inference_placement='separate', **TINY),
      _experiment(tmp_path, num_actors=3, envs_per_actor=4))
  (server,) = program.groups['inference']
  kwargs = server.arguments()[1]
  assert (kwargs['envs_per_actor'], kwargs['max_batch_size']) == (2, 6)
  actor_kwargs = program.groups['actor'][0].arguments()[1]
  assert actor_kwargs['env_groups'] == 2


@pytest.mark.parametrize('devices, kind', [
    ('', 'LogitsPolicy'), ('-1', 'LogitsPolicy'), ('0', 'Policy')])
def test_server_policy_is_tensorflow_only_on_a_gpu(monkeypatch, devices,
                                                   kind):
  # Ray sets CUDA_VISIBLE_DEVICES in every node process ('' without GPUs).
  monkeypatch.setenv('CUDA_VISIBLE_DEVICES', devices)
  assert launch.gpu_visible() == (kind == 'Policy')
  policy = seed_networks.make_policy(seed.Config(**TINY), CATCH)
  assert type(policy).__name__ == kind


@pytest.mark.parametrize('use_lstm', [False, True])
def test_server_policies_act_alike(monkeypatch, use_lstm):
  config = seed.Config(**dict(TINY, use_lstm=use_lstm))
  with components_networks.seeded(0):
    weights = components_networks.get_variables(networks.make_network(
        config, CATCH.observations, CATCH.actions))
  policies = []
  for devices in ('0', ''):  # TensorFlow's, then numpy's.
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', devices)
    policies.append(seed_networks.make_policy(config, CATCH))
    policies[-1].set_weights(weights)
  rng = np.random.default_rng(0)
  observation = rng.random((6,) + CATCH.observations.shape, np.float32)
  first = np.array([True, False] * 3)
  uniform = rng.random(6)
  # A recurrent state mid-episode (rows where `first` holds are reset).
  state = [rng.random((6, config.lstm_size), np.float32) for _ in range(2)]
  outputs = []
  for policy in policies:
    initial = policy.initial_state(6)
    outputs.append(policy.step(
        observation, type(initial)(*state) if use_lstm else initial, first,
        uniform=uniform))
  (tf_action, tf_extras, tf_state), (np_action, np_extras, np_state) = outputs
  np.testing.assert_allclose(np_extras['logits'], tf_extras['logits'],
                             atol=1e-5)
  np.testing.assert_array_equal(np_action, tf_action)
  for x, y in zip(np_state, tf_state):  # () for the feedforward network.
    np.testing.assert_allclose(x, y, atol=1e-5)


def test_seed_actor_process_does_not_import_tensorflow():
  """A process that builds a SEED actor and acts against an inference server
  (with a numpy policy, so that only the actor's imports count) holds no
  TensorFlow."""
  code = textwrap.dedent('''
      import sys
      import numpy as np
      from repertory.agents import seed
      from repertory.agents.seed import acting
      from repertory.components import inference, variables

      class ZeroPolicy:
        def initial_state(self, n):
          return ()
        def step(self, observation, state, first):
          return np.zeros(len(first), np.int32), {}, ()
        def set_weights(self, weights):
          pass

      store = variables.VariableStore({'policy': {}})
      server = inference.InferenceServer(ZeroPolicy, store, None, 'queue',
                                         unroll_length=5, envs_per_actor=3)
      config = seed.Config()
      actor = acting.SeedActor(0, 'catch', 3, 0, server,
                               batched_env_kind=config.batched_env_kind)
      actor.run(num_steps=30)
      assert actor.steps == 30
      loaded = sorted(m for m in sys.modules
                      if m.split('.')[0] in ('tensorflow', 'sonnet', 'reverb'))
      print('LOADED', loaded)
      assert not loaded, loaded
  ''')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120)
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'LOADED []' in result.stdout


def _experiment(tmp_path, **kwargs):
  values = dict(agent='seed', env='catch', num_actors=2, envs_per_actor=2,
                max_actor_steps=10_000_000, eval_episodes=2,
                logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


def test_program_shape_by_placement(tmp_path):
  colocated = seed.make_program(seed.Config(**TINY), _experiment(tmp_path))
  assert set(colocated.groups) == {'replay', 'counter', 'learner', 'monitor',
                                   'evaluator', 'actor'}
  (learner_unit,) = colocated.groups['learner']
  assert isinstance(learner_unit, launch.MultiThreadingColocation)
  assert len(learner_unit.nodes) == 2  # The learner and one server.
  separate = seed.make_program(
      seed.Config(inference_placement='separate', num_inference_servers=2,
                  **TINY), _experiment(tmp_path, num_actors=5))
  assert len(separate.groups['inference']) == 2
  assert len(separate.groups['learner']) == 1
  # Each server batches all of its actors: 0, 2, 4 and 1, 3.
  assert [node.arguments()[1]['max_batch_size']
          for node in separate.groups['inference']] == [3, 2]


@pytest.mark.parametrize('use_lstm, transport, batched_items, env_groups', [
    (False, 'tcp', False, 1), (True, 'handle', False, 1),
    (True, 'tcp', True, 1), (True, 'tcp', True, 2)])
def test_program_in_test_mt_learner_by_hand(tmp_path, use_lstm, transport,
                                            batched_items, env_groups):
  config = seed.Config(use_lstm=use_lstm, inference_transport=transport,
                       batched_items=batched_items, env_groups=env_groups,
                       **TINY)
  program = seed.make_program(config, _experiment(tmp_path))
  learner_node = program.groups['learner'][0].nodes[0]
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  try:
    learner = learner_node.create_handle().dereference()
    counter = program.groups['counter'][0].create_handle().dereference()
    versions, metrics = [], []
    for _ in range(4):
      metrics.append(testing.wait_until(learner.step, 'a batch of unrolls'))
      versions.append(learner.get_variables([networks.POLICY]).version)
    assert versions == [1, 2, 3, 4]
    # The first batch was acted by the server with version 0 weights.
    assert metrics[0]['charts/mean_rho'] == pytest.approx(1.0, abs=1e-5)
    learner.flush_counts()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
      counts = counter.get_counts()
      if counts.get('learner_steps', 0) >= 4 and counts.get('actor_steps'):
        break
      time.sleep(0.2)
    assert counts['learner_steps'] >= 4
    assert counts['policy_lag_items'] >= 4 * config.batch_size
    assert counts['actor_steps'] > 0
  finally:
    launched.stop(timeout=60)


def test_program_runs_to_its_budget_and_writes_results(tmp_path):
  program = seed.make_program(seed.Config(**TINY),
                              _experiment(tmp_path, max_actor_steps=400))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=240)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['agent'] == 'seed'
  assert results['actor_steps'] >= 400
  assert results['learner_steps'] >= 1
  assert results['policy_lag_mean'] is not None


@pytest.mark.slow
def test_seed_solves_catch_in_local_mt(tmp_path):
  experiment = _experiment(tmp_path, envs_per_actor=8,
                           max_actor_steps=300_000, stop_at_return=0.95,
                           eval_episodes=20, launch_type='local_mt',
                           progress_every_seconds=5.0)
  program = seed.make_program(seed.Config(), experiment)
  launch.launch(program, launch_type='local_mt', termination_notice_secs=5)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['eval_return_mean'] >= 0.9, results
