"""Tests of `inference.ServerActor` with a real server (in this process,
over its TCP channel) and a real Reverb queue: every group's call is in
flight before any reply is read, the server knows group g of actor i as
actor i * G + g with the group's environments, and the steps and episodes
are reported whole (SEED's actor seeds its groups: tests/agents/seed)."""

import time

import numpy as np
import pytest
import reverb
import tree

from repertory import environments
from repertory import experiment as experiment_lib
from repertory.components import adders
from repertory.components import inference
from repertory.components import variables

CATCH = experiment_lib.environment_spec('catch')
UNROLL = 3


class FirstActionPolicy:
  """A stateless policy written for the test: action 0 everywhere."""

  def initial_state(self, n):
    del n
    return ()

  def step(self, observation, state, first):
    del observation
    n = len(first)
    return np.zeros(n, np.int32), {'logits': np.zeros((n, 3), np.float32)}, state

  def set_weights(self, weights):
    del weights


def make_server(envs_per_actor, replay=None):
  return inference.InferenceServer(
      FirstActionPolicy, variables.VariableStore({'policy': {}}), replay,
      'queue', unroll_length=UNROLL, envs_per_actor=envs_per_actor,
      max_batch_size=4,
      environment_spec=adders.EnvironmentSpec(CATCH.observations,
                                              CATCH.actions, None, None),
      extras_spec={'logits': np.zeros((3,), np.float32)})


def groups(sizes, seed=0):
  start = np.cumsum([0] + list(sizes))
  return [environments.make_batched('catch', n, seed=seed + s)
          for n, s in zip(sizes, start)]


def wait_for(predicate, what, timeout=30.0):
  deadline = time.monotonic() + timeout
  while not predicate():
    assert time.monotonic() < deadline, f'timed out waiting for {what}'
    time.sleep(0.01)


@pytest.fixture
def replay():
  signature = adders.unroll_signature(
      adders.EnvironmentSpec(CATCH.observations, CATCH.actions, None, None),
      UNROLL, extras_spec={'logits': np.zeros((3,), np.float32)})
  server = reverb.Server([reverb.Table.queue('queue', 1000,
                                             signature=signature)])
  yield reverb.Client(f'localhost:{server.port}')
  server.stop()


def test_every_group_is_in_flight_before_a_reply_is_read():
  server = make_server(envs_per_actor=2)
  actor = inference.ServerActor(groups([2, 2, 2]), actor_id=0, server=server)
  try:
    actor.collect(0)  # Resets and sends every group; reads no reply.
    wait_for(lambda: server.stats()['num_calls'] == 3, 'three calls')
    assert server.stats()['num_actors'] == 3
    actor.collect(4)  # Each step reads a group's reply and sends its next.
    wait_for(lambda: server.stats()['num_calls'] == 3 + 3 * 4, '15 calls')
    assert actor.steps == 4
  finally:
    actor.close()
    server.close()


def test_one_group_is_one_call_per_step():
  server = make_server(envs_per_actor=4)
  actor = inference.ServerActor(groups([4]), actor_id=2, server=server)
  try:
    actor.collect(5)
    wait_for(lambda: server.stats()['num_calls'] == 6, 'six calls')
    assert server.stats()['num_actors'] == 1
  finally:
    actor.close()
    server.close()


def test_groups_are_the_servers_actors_with_their_environments(replay):
  server = make_server(envs_per_actor=2, replay=replay)
  actor = inference.ServerActor(groups([2, 2]), actor_id=3, server=server)
  try:
    actor.collect(2 * UNROLL)  # Two unrolls of every environment.
  finally:
    actor.close()
  wait_for(lambda: replay.server_info()['queue'].current_size >= 8,
           'two unrolls of 4 environments')
  dataset = reverb.TrajectoryDataset.from_table_signature(
      replay.server_address, 'queue', max_in_flight_samples_per_worker=1)
  items = [tree.map_structure(lambda x: x.numpy(), sample.data)
           for sample in dataset.take(8)]
  ids = sorted(int(item['actor_id']) for item in items)
  assert ids == [6, 6, 6, 6, 7, 7, 7, 7]  # 3 * 2 + g, 2 envs, 2 unrolls.
  server.close()


def test_groups_must_be_of_one_size():
  with pytest.raises(ValueError, match=r'got sizes \[2, 3\]'):
    inference.ServerActor(groups([2, 3]), actor_id=0, server=None)


def test_steps_and_episodes_are_reported_for_the_whole_batch():
  """Catch's episodes last 9 steps: 4 environments in 2 groups finish 4
  episodes at step 9, reported with 4 x 9 steps."""

  class Recorder:
    """What the actor's reports reach (the counter's and the monitor's
    `futures` calls)."""

    def __init__(self):
      self.futures = self
      self.steps, self.lengths = 0, []

    def increment(self, actor_steps):
      self.steps += actor_steps

    def record_episodes(self, returns, lengths):
      assert set(returns) <= {-1.0, 1.0}
      self.lengths.extend(lengths)

  server = make_server(envs_per_actor=2)
  reports = Recorder()
  actor = inference.ServerActor(groups([2, 2]), actor_id=0, server=server,
                                counter=reports, monitor=reports)
  try:
    actor.collect(9)
    actor.report(9)
  finally:
    actor.close()
    server.close()
  assert reports.steps == 4 * 9
  assert reports.lengths == [9] * 4
