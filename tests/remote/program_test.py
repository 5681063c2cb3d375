"""SEED's own program around remote environments (`remote.make_program`;
test_mt, real Reverb, real client processes on loopback): SEED's actors step
the slot environments, its inference server writes well-formed items with
policy versions from Python and Node.js clients, a killed client's episode
is truncated, and the learner learns from remote episodes."""

import json
import os
import signal

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import seed
from repertory.agents.impala import program as impala_program
from repertory.remote import options as options_lib
from repertory.remote import program as remote_program

TINY = dict(unroll_length=5, batch_size=4, max_queue_size=16,
            hidden_sizes=(16,), learner_log_every=1, batched_items=False)
TOKEN = 'program-test-token'
T = TINY['unroll_length']


def _program(tmp_path, config=None, **kwargs):
  values = dict(agent='seed', env='remote:catch', num_actors=1,
                envs_per_actor=1, max_actor_steps=10_000_000,
                eval_episodes=2, logdir=str(tmp_path),
                launch_type='test_mt', progress_every_seconds=0.5)
  values.update(kwargs)
  experiment = experiment_lib.ExperimentConfig(**values)
  options = options_lib.RemoteOptions(
      token_value=TOKEN, address_file=str(tmp_path / 'remote' / 'address'))
  program = remote_program.make_program(
      seed.make_program, config or seed.Config(**TINY), experiment, options)
  return program, options.address_file


def test_program_shape(tmp_path):
  """SEED's own graph (learner + inference server, its actors) plus the
  service node."""
  program, _ = _program(tmp_path, num_actors=2)
  assert set(program.groups) == {'replay', 'counter', 'learner', 'monitor',
                                 'evaluator', 'actor', 'environment'}
  (learner_unit,) = program.groups['learner']
  assert len(learner_unit.nodes) == 2  # The learner and its server.
  assert len(program.groups['actor']) == 2
  assert len(program.groups['environment']) == 1  # The service node.


def test_refuses_a_spec_that_is_not_remote(tmp_path):
  with pytest.raises(ValueError, match="remote:<spec>, got 'catch'"):
    _program(tmp_path, env='catch')


def test_items_are_well_formed_and_a_killed_client_is_truncated(tmp_path,
                                                               clients):
  program, address_file = _program(tmp_path)
  learner_node = program.groups['learner'][0].nodes[0]
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  try:
    node = program.groups['environment'][0].create_handle().dereference()
    replay = program.groups['replay'][0].create_handle().dereference()
    # 1. Four whole episodes (slot 0): 40 timesteps.
    result = clients.summary(clients.python_client(
        address_file, TOKEN, '--episodes=4', '--seconds=120'))
    assert result['episodes'] == 4 and result['actions'] == 40
    # 2. A client killed (SIGKILL) after 3 steps of its episode: FIRST + 3
    #    timesteps, then the service's truncation step.
    killed = clients.python_client(address_file, TOKEN, '--hold_after=3',
                                    '--seconds=120')
    assert killed.stdout.readline().strip() == 'HOLDING'
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    testing.wait_until(lambda: node.stats()['truncated_by_disconnect'] == 1,
                       'the killed session to be truncated')
    assert node.stats()['open_episodes'] == 0
    # 3. Two more episodes on the same slot push the truncation into items.
    result = clients.summary(clients.python_client(
        address_file, TOKEN, '--episodes=2', '--seconds=120'))
    assert result['episodes'] == 2
    timesteps = 40 + 4 + 1 + 20
    expected_items = (timesteps - 1) // T
    testing.wait_until(
        lambda: testing.table_size(replay, impala_program.TABLE)
        >= expected_items, f'{expected_items} items')
    items = testing.read_queue(replay, impala_program.TABLE)
    assert len(items) == expected_items
    truncations = 0
    previous_last = None
    for item in items:
      assert item['observation'].shape == (T + 1, 10, 5)
      assert item['observation'].dtype == np.float32
      assert item['action'].shape == (T + 1,)
      assert set(np.unique(item['action'][:-1])) <= {0, 1, 2}
      assert item['extras']['logits'].shape == (T + 1, 3)
      assert np.all(np.isfinite(item['extras']['logits']))
      assert set(np.unique(item['step_type'])) <= {0, 1, 2}
      assert int(item['policy_version']) == 0  # The learner never stepped.
      if previous_last is not None:  # Unrolls overlap by one timestep.
        np.testing.assert_array_equal(item['observation'][0], previous_last)
      previous_last = item['observation'][-1]
      for t in range(1, T + 1):
        if item['step_type'][t] == 2 and item['discount'][t] == 1.0:
          truncations += 1
          assert item['reward'][t] == 0.0
          np.testing.assert_array_equal(item['observation'][t],
                                        item['observation'][t - 1])
        if item['step_type'][t] == 2 and item['discount'][t] == 0.0:
          assert abs(item['reward'][t]) == 1.0  # Catch's final reward.
        if item['step_type'][t - 1] == 2:
          assert item['step_type'][t] == 0  # A new episode follows an end.
    assert truncations == 1
  finally:
    launched.stop(timeout=60)


def _start(clients, kind, address_file, *args):
  if kind == 'node':
    clients.require_node()
    return clients.node_client(address_file, TOKEN, *args)
  return clients.python_client(address_file, TOKEN, *args)


def _play_to_the_end(tmp_path, clients, kind, launched, address_file,
                     processes, episodes_each, seconds, timeout):
  """`processes` client processes of `episodes_each` concurrent episodes
  play until the launched program ends; returns its results.json."""
  concurrency = (f'--threads={episodes_each}' if kind == 'python' else
                 f'--concurrent={episodes_each}')
  started = [_start(clients, kind, address_file, f'--seconds={seconds}',
                    concurrency, f'--seed={i}') for i in range(processes)]
  try:
    assert launched.wait(timeout=timeout)
  finally:
    for process in started:
      if process.poll() is None:
        process.kill()
      process.wait(timeout=30)
    launched.stop(timeout=60)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    return json.load(f)


@pytest.mark.parametrize('kind', ['python', 'node'])
def test_learner_learns_from_client_processes(tmp_path, clients, kind):
  if kind == 'node':
    clients.require_node()
  # Four episodes at once: two actors of two environments each.
  program, address_file = _program(tmp_path, max_actor_steps=1_000,
                                   num_actors=2, envs_per_actor=2)
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  results = _play_to_the_end(tmp_path, clients, kind, launched, address_file,
                             processes=2, episodes_each=2, seconds=300,
                             timeout=280)
  assert results['env'] == 'remote:catch'
  assert results['actor_steps'] >= 1_000  # Counted from remote steps only.
  assert results['learner_steps'] >= 1
  assert results['policy_lag_mean'] is not None


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['python', 'node'])
def test_remote_clients_solve_catch(tmp_path, clients, kind):
  """Four client processes x 4 episodes each on 2 actors x 8 environments;
  evaluated on local catch."""
  program, address_file = _program(
      tmp_path, max_actor_steps=200_000, stop_at_return=0.9, num_actors=2,
      envs_per_actor=8,
      eval_episodes=20, launch_type='local_mt', progress_every_seconds=5.0)
  launched = launch.launch(program, launch_type='local_mt',
                           termination_notice_secs=5, block=False)
  results = _play_to_the_end(tmp_path, clients, kind, launched, address_file,
                             processes=4, episodes_each=4, seconds=600,
                             timeout=600)
  assert results['eval_return_mean'] >= 0.9, results
