"""Tests of the central inference server with annotated event streams.

The policy here is a tiny real policy written for the test: its recurrent
state counts the steps of each environment's episode and its action is that
count, so every returned action shows which state the server held for that
(actor, environment).
"""

import threading
import time

import numpy as np
import pytest
import reverb
import tree

from repertory.components import adders
from repertory.components import inference
from repertory.components import variables
from repertory.launch.transport import channel
from dm_env import specs

F, M, L = 0, 1, 2  # dm_env step types.
N = 2              # environments per actor.


class CountingPolicy:
  """action = steps since the episode started; state = that count."""

  def __init__(self):
    self.weights = None
    self.batch_sizes = []

  def initial_state(self, n):
    return {'count': np.zeros((n,), np.int32)}

  def step(self, observation, state, first):
    count = np.where(first, 0, state['count'])
    self.batch_sizes.append(len(first))
    logits = np.repeat(observation[:, :1], 3, axis=1).astype(np.float32)
    return count.copy(), {'logits': logits}, {'count': count + 1}

  def set_weights(self, weights):
    self.weights = weights


def make_server(replay=None, store=None, **kwargs):
  store = store or variables.VariableStore({'policy': {'w': np.zeros(1)}})
  policy = CountingPolicy()
  defaults = dict(unroll_length=3, envs_per_actor=N, max_batch_size=4,
                  batch_timeout_ms=1.0)
  defaults.update(kwargs)
  server = inference.InferenceServer(
      lambda: policy, store, replay, 'queue',
      environment_spec=adders.EnvironmentSpec(
          specs.Array((2,), np.float32), specs.Array((), np.int32), None,
          None),
      extras_spec={'logits': np.zeros((3,), np.float32)},
      core_state_spec={'count': np.zeros((), np.int32)}, **defaults)
  return server, policy, store


def call(server, actor, run, step_type, reward=0.0, obs_value=0.0, via=None):
  """One actor step through `server.inference`, or through the channel
  client `via`."""
  step_type = np.asarray(step_type, np.int8)
  observation = np.full((N, 2), obs_value, np.float32)
  inference = server.inference if via is None else via.call
  return inference(np.int64(actor), np.int64(run), step_type,
                   np.full(N, reward, np.float32), np.ones(N, np.float32),
                   observation)


# (actor, run id, step types of its 2 envs, expected actions = state held,
#  why)
EVENTS = [
    (0, 1, [F, F], [0, 0], 'a new actor starts from zero states'),
    (0, 1, [M, M], [1, 1], 'states advance per environment'),
    (1, 7, [F, F], [0, 0], 'another actor has states of its own'),
    (0, 1, [L, M], [2, 2], 'a LAST step still uses the episode state'),
    (0, 1, [F, M], [0, 3], 'a new episode resets only its environment'),
    (1, 7, [M, F], [1, 0], 'actor 1 is untouched by actor 0'),
    (0, 2, [F, F], [0, 0], 'a restarted actor (new run id) starts over'),
    (0, 2, [M, M], [1, 1], 'and continues from its new states'),
]


def test_state_is_keyed_by_actor_and_environment():
  server, policy, _ = make_server()
  for actor, run, step_types, expected, why in EVENTS:
    actions = call(server, actor, run, step_types)
    np.testing.assert_array_equal(actions, expected, err_msg=why)
  assert policy.weights == {'w': np.zeros(1)}
  assert server.stats()['num_actors'] == 2


def test_first_call_of_a_run_must_be_first_steps():
  server, _, _ = make_server()
  with pytest.raises(ValueError, match='must hold FIRST timesteps'):
    call(server, 0, 1, [M, M])


def test_duplicate_actor_in_one_batch_is_rejected():
  server, _, _ = make_server(max_batch_size=2, batch_timeout_ms=5000.0)
  call(server, 0, 1, [F, F])
  errors = []

  def go():
    try:
      call(server, 0, 1, [M, M])
    except ValueError as e:
      errors.append(str(e))

  threads = [threading.Thread(target=go) for _ in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(30)
  assert len(errors) == 2 and 'appear twice in one batch' in errors[0]


@pytest.mark.parametrize('transport', ['direct', 'tcp'])
def test_concurrent_actors_are_served_in_one_forward_pass(transport):
  num_actors, num_steps = 3, 5
  server, policy, _ = make_server(max_batch_size=num_actors,
                                  batch_timeout_ms=5000.0)
  results = {}

  def actor(a):
    via = (channel.ChannelClient(server.channel_address())
           if transport == 'tcp' else None)
    out = [call(server, a, 100 + a, [F, F], via=via)]
    for _ in range(num_steps - 1):
      out.append(call(server, a, 100 + a, [M, M], via=via))
    results[a] = out

  threads = [threading.Thread(target=actor, args=(a,))
             for a in range(num_actors)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(60)
  stats = server.stats()
  assert stats['num_calls'] == num_actors * num_steps
  # Every actor waits for its answer, so each batch holds one call of each.
  assert stats['num_batches'] == num_steps
  assert policy.batch_sizes == [num_actors * N] * num_steps
  for a in range(num_actors):
    np.testing.assert_array_equal(np.stack(results[a])[:, 0],
                                  np.arange(num_steps))


def test_channel_errors_reach_the_caller_and_close_ends_the_channel():
  server, _, _ = make_server()
  address = server.channel_address()
  assert server.channel_address() == address  # Started once.
  client = channel.ChannelClient(address)
  with pytest.raises(channel.ChannelError, match='must hold FIRST'):
    call(server, 9, 1, [M, M], via=client)
  np.testing.assert_array_equal(call(server, 9, 1, [F, F], via=client),
                                [0, 0])
  server.close()
  with pytest.raises((ConnectionError, OSError)):
    call(server, 9, 1, [M, M], via=client)


@pytest.fixture
def replay():
  signature = adders.unroll_signature(
      adders.EnvironmentSpec(specs.Array((2,), np.float32),
                             specs.Array((), np.int32), None, None),
      3, extras_spec={'logits': np.zeros((3,), np.float32)},
      core_state_spec={'count': np.zeros((), np.int32)})
  reverb_server = reverb.Server(
      [reverb.Table.queue('queue', 100, signature=signature)])
  client = reverb.Client(f'localhost:{reverb_server.port}')
  yield client
  reverb_server.stop()


def wait_for_size(client, size, timeout=120):
  """Waits for the server's writer to deliver `size` items (asynchronous)."""
  deadline = time.monotonic() + timeout
  while client.server_info()['queue'].current_size < size:
    assert time.monotonic() < deadline, f'fewer than {size} items arrived'
    time.sleep(0.05)
  return client.server_info()['queue'].current_size


def sample_all(client, count):
  dataset = reverb.TrajectoryDataset.from_table_signature(
      client.server_address, 'queue', max_in_flight_samples_per_worker=1)
  return [tree.map_structure(lambda x: x.numpy(), sample.data)
          for sample in dataset.take(count)]


def test_unrolls_are_written_with_versions_and_states(replay):
  store = variables.VariableStore({'policy': {'w': np.zeros(1)}})
  server, _, _ = make_server(replay=replay, store=store,
                             variable_update_period=1)
  # Steps 0..6 of actor 5; T = 3, so items cover steps 0..3 and 3..6.
  # (step type, reward, observation value, version published before it)
  stream = [(F, 0., 0., None), (M, 1., 1., None), (M, 2., 2., 1),
            (L, 3., 3., None), (F, 0., 4., None), (M, 5., 5., 2),
            (M, 6., 6., None), (M, 7., 7., None)]
  for step_type, reward, obs, publish in stream:
    if publish is not None:
      assert store.publish({'policy': {'w': np.ones(1)}}) == publish
    call(server, 5, 9, [step_type] * N, reward=reward, obs_value=obs)
  assert wait_for_size(replay, 2 * N) == 2 * N
  items = sample_all(replay, 2 * N)
  first, second = items[0], items[N]
  np.testing.assert_array_equal(first['step_type'], [F, M, M, L])
  np.testing.assert_array_equal(first['reward'], [0, 1, 2, 3])
  np.testing.assert_array_equal(first['observation'][:, 0], [0, 1, 2, 3])
  # Actions are the step counts; the action at the last index is unknown
  # when the unroll is written (zeros).
  np.testing.assert_array_equal(first['action'], [0, 1, 2, 0])
  assert int(first['actor_id']) == 5
  # The action at index 0 was chosen with version 0.
  assert int(first['policy_version']) == 0
  assert int(first['core_state']['count']) == 0
  np.testing.assert_array_equal(second['step_type'], [L, F, M, M])
  np.testing.assert_array_equal(second['observation'][:, 0], [3, 4, 5, 6])
  np.testing.assert_array_equal(second['action'], [3, 0, 1, 0])
  # Step 3's action was chosen after version 1 was pulled (at step 2).
  assert int(second['policy_version']) == 1
  # The state held before step 3 (3 steps into the episode).
  assert int(second['core_state']['count']) == 3


def test_restarted_actor_drops_its_partial_unroll(replay):
  server, _, _ = make_server(replay=replay)
  call(server, 0, 1, [F, F])
  call(server, 0, 1, [M, M])
  call(server, 0, 2, [F, F])  # Restart: the partial unroll is dropped.
  for _ in range(3):
    call(server, 0, 2, [M, M])
  items = sample_all(replay, N)
  assert replay.server_info()['queue'].current_size == 0
  np.testing.assert_array_equal(items[0]['step_type'], [F, M, M, M])
  np.testing.assert_array_equal(items[0]['action'], [0, 1, 2, 0])
