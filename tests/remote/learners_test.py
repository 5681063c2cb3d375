"""Any agent acts in remote episodes with its own actors (test_mt, real
Reverb, real client processes on loopback): PPO (synchronous rounds) and
R2D2 (recurrent sequences) built by `remote.make_program` around their own
`make_program`, their actors stepping the slot environments, learn; steps
with legal masks or logged actions are refused naming the field."""

import json
import os
import signal

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import ppo
from repertory.agents import r2d2
from repertory.remote import options as options_lib
from repertory.remote import program as remote_program

TOKEN = 'learners-test-token'
PPO_TINY = dict(unroll_length=5, num_epochs=1, num_minibatches=1,
                hidden_sizes=(16,), round_timeout_s=120.0)
R2D2_TINY = dict(torso_sizes=(16,), lstm_size=8, head_sizes=(16,), burn_in=2,
                 trace_length=3, sequence_period=2, batch_size=4,
                 min_replay_size=8, replay_size=500, samples_per_insert=1.0,
                 samples_per_insert_tolerance=50.0, target_update_period=2,
                 variable_update_period=1)


def _program(tmp_path, module, config, **kwargs):
  """`module`'s program around two actors of two environments each: four
  remote episodes at once."""
  values = dict(agent=module.__name__.rsplit('.', 1)[-1], env='remote:catch',
                num_actors=2,
                envs_per_actor=2, max_actor_steps=10_000_000,
                eval_episodes=1, logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  options = options_lib.RemoteOptions(
      token_value=TOKEN, address_file=str(tmp_path / 'remote' / 'address'))
  program = remote_program.make_program(
      module.make_program, config,
      experiment_lib.ExperimentConfig(**values), options)
  return program, options.address_file


def _start_clients(clients, address_file):
  return [clients.python_client(address_file, TOKEN, '--threads=2',
                                '--seconds=200', f'--seed={i}')
          for i in range(2)]


def _stop(processes):
  for process in processes:
    if process.poll() is None:
      process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def _run_with_clients(tmp_path, clients, program, address_file):
  """Runs `program` to its budget with two client processes; returns
  results.json."""
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  processes = _start_clients(clients, address_file)
  try:
    assert launched.wait(timeout=200)
  finally:
    _stop(processes)
    launched.stop(timeout=60)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['env'] == 'remote:catch'
  return results


def test_ppo_learns_from_remote_clients(tmp_path, clients):
  results = _run_with_clients(tmp_path, clients, *_program(
      tmp_path, ppo, ppo.Config(**PPO_TINY), max_actor_steps=300))
  assert results['actor_steps'] >= 300
  # 300 steps at 20 steps a round (2 actors x 2 environments x 5): the
  # learner took many rounds from PPO's own actors.
  assert results['learner_steps'] >= 5, results


@pytest.mark.parametrize('field,extra', [
    ('step.legal_actions', dict(legal_actions=np.array([True, False, True]))),
    ('step.logged', dict(logged_action=1))])
def test_masks_and_logged_actions_are_refused_naming_the_field(
    tmp_path, field, extra):
  from repertory_remote import client as client_lib  # pylint: disable=g-import-not-at-top
  program, address_file = _program(tmp_path, ppo, ppo.Config(**PPO_TINY))
  program.groups['learner'][0].disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  try:
    testing.wait_until(lambda: os.path.exists(address_file), 'the address file')
    with open(address_file) as f:
      address = f.read().strip()
    specs = client_lib.Specs((10, 5), 'float32', 3)
    with client_lib.Client(address, specs, token=TOKEN) as client:
      episode = client.episode()
      with pytest.raises(client_lib.RemoteError, match=field):
        episode.step(np.zeros((10, 5), np.float32), **extra)
  finally:
    launched.stop(timeout=60)


def test_r2d2_learns_from_remote_clients(tmp_path, clients):
  program, address_file = _program(tmp_path, r2d2, r2d2.Config(**R2D2_TINY))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  processes = _start_clients(clients, address_file)
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    node = program.groups['environment'][0].create_handle().dereference()
    testing.wait_until(
        lambda: counter.get_counts().get('learner_steps', 0) >= 20,
        '20 learner steps from remote sequences', 180)
    counts = counter.get_counts()
    stats = node.stats()
  finally:
    _stop(processes)
    launched.stop(timeout=60)
  assert counts['actor_steps'] > 0
  assert stats['attached'] == 4  # R2D2's 2 actors x 2 environments.
  assert stats['steps'] > 0


def test_impala_learns_from_remote_clients(tmp_path, clients):
  """An agent with no code for remote environments: its own actors."""
  from repertory.agents import impala  # pylint: disable=g-import-not-at-top
  config = impala.Config(unroll_length=5, batch_size=4, max_queue_size=16,
                         hidden_sizes=(16,))
  results = _run_with_clients(tmp_path, clients, *_program(
      tmp_path, impala, config, max_actor_steps=400))
  assert results['actor_steps'] >= 400
  assert results['learner_steps'] >= 1, results
