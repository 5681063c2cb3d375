"""Tests of policy snapshots: the loaded policy acts like the original."""

import os
import subprocess
import sys

import dm_env
from dm_env import specs
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.components import model_store


def test_feed_forward_snapshot_acts_like_the_network(tmp_path):
  spec = specs.Array((5,), np.float32)
  network = snt.nets.MLP([16, 3])
  policy = lambda obs: tf.argmax(network(obs), axis=-1, output_type=tf.int32)
  observations = np.random.RandomState(0).randn(7, 5).astype(np.float32)
  expected = policy(observations).numpy()

  path = model_store.export_policy(str(tmp_path / 'snap'), policy, spec,
                                   owner=network)
  loaded = model_store.load_policy(path)
  np.testing.assert_array_equal(loaded.policy(observations).numpy(), expected)


def test_recurrent_snapshot_carries_state(tmp_path):
  spec = specs.Array((4,), np.float32)
  core = snt.LSTM(8)
  head = snt.Linear(2)
  owner = snt.Sequential([core, head])

  def policy(obs, state):
    out, state = core(tf.convert_to_tensor(obs), state)
    return tf.argmax(head(out), axis=-1, output_type=tf.int32), state

  initial_state = lambda batch: core.initial_state(batch)
  inputs = np.random.RandomState(1).randn(6, 1, 4).astype(np.float32)
  state = initial_state(1)
  expected = []
  for x in inputs:
    action, state = policy(x, state)
    expected.append(int(action[0]))

  path = model_store.export_policy(str(tmp_path / 'snap'), policy, spec,
                                   owner=owner, initial_state=initial_state)
  actor = model_store.SnapshotActor(model_store.load_policy(path))
  actor.observe_first(dm_env.restart(inputs[0, 0]))
  got = [int(actor.select_action(x[0])) for x in inputs]
  assert got == expected


def test_evaluate_command_runs_a_snapshot(tmp_path):
  from repertory import environments  # pylint: disable=g-import-not-at-top
  env = environments.make('catch')
  size = int(np.prod(env.observation_spec().shape))
  network = snt.nets.MLP([3])
  network(tf.zeros([1, size]))
  policy = lambda obs: tf.argmax(
      network(tf.reshape(tf.cast(obs, tf.float32), [-1, size])), axis=-1,
      output_type=tf.int32)
  path = model_store.export_policy(str(tmp_path / 'snap'), policy,
                                   env.observation_spec(), owner=network)
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.evaluate', f'--snapshot={path}',
       '--env=catch', '--episodes=3'],
      capture_output=True, text=True, timeout=120,
      env={**os.environ, 'CUDA_VISIBLE_DEVICES': ''})
  assert result.returncode == 0, result.stderr[-2000:]
  assert '"eval_episodes": 3' in result.stdout
