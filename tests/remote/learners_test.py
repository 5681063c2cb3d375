"""PPO and R2D2 learn from remote episodes (test_mt, real Reverb, real
client processes on loopback): the items that reach their tables have the
learners' shapes and layouts (PPO: one round of unrolls of one version with
behaviour log-probs and values; R2D2: sequences with the stored LSTM state,
OAR observations, zero state at episode starts), and the learners step."""

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
from repertory.agents.ppo import acting as ppo_acting
from repertory.agents.r2d2 import program as r2d2_program
from repertory.remote import options as options_lib

TOKEN = 'learners-test-token'
PPO_TINY = dict(unroll_length=5, num_epochs=1, num_minibatches=1,
                hidden_sizes=(16,), round_timeout_s=120.0)
R2D2_TINY = dict(torso_sizes=(16,), lstm_size=8, head_sizes=(16,), burn_in=2,
                 trace_length=3, sequence_period=2, batch_size=4,
                 min_replay_size=8, replay_size=500, samples_per_insert=1.0,
                 samples_per_insert_tolerance=50.0, target_update_period=2,
                 variable_update_period=1)


def _program(tmp_path, agent, config, **kwargs):
  values = dict(agent=agent, env='remote:catch', num_actors=1,
                envs_per_actor=2, max_actor_steps=10_000_000,
                eval_episodes=1, logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  options = options_lib.RemoteOptions(
      token_value=TOKEN, address_file=str(tmp_path / 'remote' / 'address'))
  module = ppo if agent == 'ppo' else r2d2
  program = module.make_program(
      config, experiment_lib.ExperimentConfig(**values),
      remote_options=options)
  return program, options.address_file


def _read_distinct(client, table, draws):
  """Distinct items among `draws` prioritized samples (by key)."""
  items = {}
  for sample in client.sample(table, draws, emit_timesteps=False,
                              unpack_as_table_signature=True):
    items[int(sample.info.key)] = sample.data
  return list(items.values())


def _stop(processes):
  for process in processes:
    if process.poll() is None:
      process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def test_ppo_round_of_remote_unrolls(tmp_path, clients):
  """Learner not running: exactly one round (num_actors x envs_per_actor =
  2 unrolls) of version 0 reaches the queue, then the node waits."""
  program, address_file = _program(tmp_path, 'ppo', ppo.Config(**PPO_TINY))
  assert len(program.groups['actor']) == 1  # The remote node, no actors.
  program.groups['learner'][0].disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  processes = [clients.python_client(address_file, TOKEN, '--threads=3',
                                     '--seconds=60')]
  try:
    node = program.groups['actor'][0].create_handle().dereference()
    replay = program.groups['replay'][0].create_handle().dereference()
    testing.wait_until(lambda: node.stats()['written'] >= 2,
                       'a round of unrolls', 120)
    calls = node.stats()['num_calls']
    import time  # pylint: disable=g-import-not-at-top
    time.sleep(2.0)  # The node waits for version 1: no more steps.
    stats = node.stats()
    assert stats['num_calls'] == calls
    assert stats['rounds'] == 0 and stats['version'] == 0
    assert stats['written'] == 2
    items = testing.read_queue(replay, ppo_acting.QUEUE)
    assert len(items) == 2  # One round; nothing more until version 1.
    for item in items:
      assert item['observation'].shape == (6, 10, 5)
      assert item['action'].shape == (6,)
      assert set(np.unique(item['action'][:-1])) <= {0, 1, 2}
      log_prob = item['extras']['log_prob'][:-1]
      assert np.all(np.isfinite(log_prob)) and np.all(log_prob <= 0.0)
      assert np.all(log_prob > np.log(1e-3))  # Sampled from 3 actions.
      assert item['extras']['value'].shape == (6,)
      assert int(item['policy_version']) == 0
      assert int(item['actor_id']) == 0
      assert set(np.unique(item['step_type'])) <= {0, 1, 2}
  finally:
    _stop(processes)
    launched.stop(timeout=60)


def test_ppo_learns_from_remote_clients(tmp_path, clients):
  program, address_file = _program(tmp_path, 'ppo', ppo.Config(**PPO_TINY),
                                   max_actor_steps=300)
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  processes = [clients.python_client(address_file, TOKEN, '--threads=2',
                                     '--seconds=200', f'--seed={i}')
               for i in range(2)]
  try:
    assert launched.wait(timeout=200)
  finally:
    _stop(processes)
    launched.stop(timeout=60)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['env'] == 'remote:catch'
  assert results['actor_steps'] >= 300
  # 300 steps at 10 steps a round: the learner took many rounds, each from
  # one policy version (a lagging unroll would have failed the learner).
  assert results['learner_steps'] >= 10, results


def test_ppo_refuses_legal_masks_naming_the_field(tmp_path):
  from repertory_remote import client as client_lib  # pylint: disable=g-import-not-at-top
  program, address_file = _program(tmp_path, 'ppo', ppo.Config(**PPO_TINY))
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
      with pytest.raises(client_lib.RemoteError, match='step.legal_actions'):
        episode.step(np.zeros((10, 5), np.float32),
                     legal_actions=np.array([True, False, True]))
  finally:
    launched.stop(timeout=60)


def test_r2d2_sequences_from_remote_clients(tmp_path, clients):
  """Learner not running: sequences with OAR observations, the LSTM state
  stored per sequence (zero where a sequence starts an episode)."""
  config = r2d2.Config(**R2D2_TINY)
  program, address_file = _program(tmp_path, 'r2d2', config)
  program.groups['learner'][0].disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  processes = [clients.python_client(address_file, TOKEN, '--threads=2',
                                     '--episodes=6', '--seconds=120')]
  try:
    summary = clients.summary(processes[0])
    assert summary['episodes'] >= 6  # Two threads may each start one more.
    replay = program.groups['replay'][0].create_handle().dereference()
    # 6 episodes of 10 observations, sequences of 6 steps every 2 steps on
    # each of the 2 slots (they continue across episodes).
    testing.wait_until(
        lambda: testing.table_size(replay, r2d2_program.TABLE) >= 20,
        'sequences')
    size = replay.server_info()[r2d2_program.TABLE].current_size
    items = _read_distinct(replay, r2d2_program.TABLE, 8 * size)
    assert len(items) >= size // 2
    length = config.sequence_length
    starts_with_zero_state = 0
    for item in items:
      observation = item['observation']
      assert observation.observation.shape == (length, 10, 5)
      assert item['action'].shape == (length,)
      assert item['extras']['q_values'].shape == (length, 3)
      assert item['core_state']['hidden'].shape == (config.lstm_size,)
      step_type = item['step_type']
      for t in range(length - 1):
        if step_type[t + 1] == 0:  # A new episode: OAR's action/reward 0.
          assert observation.action[t + 1] == 0
          assert observation.reward[t + 1] == 0.0
        elif step_type[t] != 2:  # OAR carries the previous action/reward.
          assert observation.action[t + 1] == item['action'][t]
          assert observation.reward[t + 1] == item['reward'][t]
      if step_type[0] == 0:  # Starts an episode: the state was reset.
        starts_with_zero_state += 1
        assert not np.any(item['core_state']['hidden'])
        assert not np.any(item['core_state']['cell'])
    assert starts_with_zero_state >= 1
    assert any(np.any(item['core_state']['hidden']) for item in items)
  finally:
    _stop(processes)
    launched.stop(timeout=60)


def test_r2d2_learns_from_remote_clients(tmp_path, clients):
  program, address_file = _program(tmp_path, 'r2d2',
                                   r2d2.Config(**R2D2_TINY))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  processes = [clients.python_client(address_file, TOKEN, '--threads=2',
                                     '--seconds=200', f'--seed={i}')
               for i in range(2)]
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    node = program.groups['actor'][0].create_handle().dereference()
    testing.wait_until(
        lambda: counter.get_counts().get('learner_steps', 0) >= 20,
        '20 learner steps from remote sequences', 180)
    counts = counter.get_counts()
    stats = node.stats()
  finally:
    _stop(processes)
    launched.stop(timeout=60)
  assert counts['actor_steps'] > 0
  assert stats['slots'] == 4  # 2 processes x 2 concurrent episodes.
  assert stats['version'] >= 1  # The node acts with the learner's weights.
