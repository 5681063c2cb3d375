"""Tables, datasets, priority updates and stale-sample dropping."""

import time

import dm_env
from dm_env import specs
import numpy as np
import pytest
import reverb

from repertory import launch
from repertory.components import adders
from repertory.components import replay

ENV_SPEC = adders.EnvironmentSpec(
    specs.Array((3,), np.float32), specs.Array((), np.int32),
    specs.Array((), np.float32), specs.Array((), np.float32))


@pytest.fixture
def server_factory():
  servers = []

  def make(tables):
    server = reverb.Server(tables)
    servers.append(server)
    return reverb.Client(f'localhost:{server.port}')

  yield make
  for server in servers:
    server.stop()


def write_transitions(client, table, num, version=0):
  adder = adders.NStepTransitionAdder(client, 1, 0.9, table)
  adder.set_policy_version(version)
  adder.add_first(dm_env.restart(np.zeros(3, np.float32)))
  for k in range(num):
    adder.add(np.int32(k), dm_env.transition(
        np.float32(k), np.full(3, k + 1, np.float32)))
  adder.flush()


def test_invalid_combinations_are_explained():
  with pytest.raises(ValueError, match='smaller than one batch'):
    replay.queue_table('q', max_size=4, batch_size=8)
  with pytest.raises(ValueError, match='min_size_to_sample=100 exceeds'):
    replay.uniform_replay_table('r', max_size=10, min_size_to_sample=100)
  with pytest.raises(ValueError, match='deadlock'):
    replay.rate_limiter(10, samples_per_insert=8.0, error_buffer=2.0)
  with pytest.raises(ValueError, match='samples_per_insert'):
    replay.rate_limiter(10, error_buffer=2.0)


def test_error_buffer_is_derived_from_the_ratio():
  assert replay.error_buffer_for(4.0, 1000) == pytest.approx(400.0)
  # Never below what keeps both sides moving.
  assert replay.error_buffer_for(4.0, 1) == 8.0
  assert replay.error_buffer_for(0.5, 1, batch_size=32) == 32.0
  limiter = replay.rate_limiter(100, samples_per_insert=2.0)
  assert isinstance(limiter, reverb.rate_limiters.SampleToInsertRatio)


def test_dataset_batches_with_sample_info(server_factory):
  sig = adders.NStepTransitionAdder.signature(ENV_SPEC)
  client = server_factory([replay.prioritized_replay_table(
      'replay', 100, signature=sig, batch_size=4)])
  write_transitions(client, 'replay', 10, version=3)
  dataset = replay.make_dataset(client, 'replay', batch_size=4)
  sample = next(iter(dataset))
  assert sample.data['observation'].shape == (4, 3)
  assert sample.info.key.shape == (4,)
  # 10 steps of an unfinished episode: the 10th transition waits for the
  # next step (its next observation).
  np.testing.assert_array_equal(sample.info.table_size, [9] * 4)
  np.testing.assert_allclose(sample.info.probability, [1 / 9] * 4)
  np.testing.assert_array_equal(sample.data['policy_version'], [3] * 4)


def test_batched_items_are_split_into_samples_before_batching(
    server_factory):
  """Three items of 2 unrolls each, batches of 4: the unrolls in the order
  written, each with its item's key, across item boundaries."""
  unroll_length, num_envs = 2, 2
  sig = adders.unroll_signature(ENV_SPEC, unroll_length,
                                envs_per_item=num_envs)
  client = server_factory([replay.queue_table('queue', 10, signature=sig)])
  adder = adders.UnrollAdder(client, 'queue', unroll_length, num_envs,
                             environment_spec=ENV_SPEC, batched_items=True)
  step = lambda k: dm_env.TimeStep(
      np.full(num_envs, dm_env.StepType.MID), np.zeros(num_envs, np.float32),
      np.ones(num_envs, np.float32),
      (np.arange(num_envs)[:, None] * 100 + np.full((1, 3), k)).astype(
          np.float32))
  adder.add_first(step(0))
  for k in range(1, 3 * unroll_length + 1):
    adder.set_policy_version(k)
    adder.add(np.zeros(num_envs, np.int32), step(k))
  adder.flush()
  dataset = replay.make_dataset(client, 'queue', batch_size=4,
                                max_in_flight_samples_per_worker=4,
                                rate_limiter_timeout_ms=500,
                                drop_remainder=False, unbatch_items=True)
  iterator = iter(dataset)
  first, second = next(iterator), next(iterator)
  assert second.data['observation'].shape[0] == 2  # The queue is empty.
  observations = np.concatenate([first.data['observation'][:, 0, 0],
                                 second.data['observation'][:, 0, 0]])
  # Unroll u of env e starts at step 2u: its first observation 100 e + 2u.
  np.testing.assert_array_equal(observations, [0, 100, 2, 102, 4, 104])
  np.testing.assert_array_equal(first.data['policy_version'], [1, 1, 3, 3])
  keys = first.info.key.numpy()
  assert keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2]


def test_unbatch_items_needs_a_shared_leading_dimension(server_factory):
  sig = adders.unroll_signature(ENV_SPEC, 2)  # One unroll per item.
  client = server_factory([replay.queue_table('queue', 10, signature=sig)])
  with pytest.raises(ValueError, match='do not share a leading dimension'):
    replay.make_dataset(client, 'queue', batch_size=4, unbatch_items=True)


def test_a_missing_table_is_named(server_factory):
  sig = adders.unroll_signature(ENV_SPEC, 2)
  client = server_factory([replay.queue_table('queue', 10, signature=sig)])
  with pytest.raises(ValueError, match="no table 'queu' .tables: queue."):
    replay.make_dataset(client, 'queu', batch_size=4)


def test_priority_updates_change_what_is_sampled(server_factory):
  sig = adders.NStepTransitionAdder.signature(ENV_SPEC)
  client = server_factory([replay.prioritized_replay_table(
      'replay', 100, priority_exponent=1.0, signature=sig)])
  write_transitions(client, 'replay', 5)
  keys = [s.info.key for s in client.sample('replay', 50,
                                            emit_timesteps=False)]
  favourite = keys[0]
  updater = replay.PriorityUpdater(client, 'replay')
  updater.update(list(set(keys)), [1e-6 if k != favourite else 1e6
                                   for k in set(keys)])
  updater.flush()
  assert updater.num_sent == 1
  sampled = [s.info.key for s in client.sample('replay', 20,
                                               emit_timesteps=False)]
  assert all(k == favourite for k in sampled)
  updater.close()


def test_priority_update_validates():
  server = reverb.Server([replay.uniform_replay_table('r', 10)])
  try:
    updater = replay.PriorityUpdater(
        reverb.Client(f'localhost:{server.port}'), 'r')
    with pytest.raises(ValueError, match='one priority per sampled key'):
      updater.update([1, 2], [1.0])
    updater.close()
  finally:
    server.stop()


def test_drop_stale():
  batch = {'policy_version': np.array([10, 7, 9, 4]),
           'observation': np.arange(4)}
  result = replay.drop_stale(batch, learner_version=10, max_policy_lag=2)
  assert result.num_dropped == 2
  np.testing.assert_array_equal(result.lag, [0, 3, 1, 6])
  np.testing.assert_array_equal(result.kept['observation'], [0, 2])
  np.testing.assert_array_equal(result.mask, [True, False, True, False])
  with pytest.raises(KeyError, match='policy_version'):
    replay.drop_stale({'x': np.zeros(2)}, 0, 1)


def test_starved_learner_says_what_it_waits_for(server_factory):
  sig = adders.NStepTransitionAdder.signature(ENV_SPEC)
  client = server_factory([replay.queue_table('queue', 10, signature=sig)])
  iterator = replay.StarvationLoggingIterator(
      iter(replay.make_dataset(client, 'queue', batch_size=2)), client,
      'queue', log_every_s=0.2, timeout_s=0.5)
  with pytest.raises(TimeoutError, match=r"table 'queue': size 0/10"):
    next(iterator)
  write_transitions(client, 'queue', 3)
  assert next(iterator).data['action'].shape == (2,)  # the same request.
  iterator.close()


def starved_learner(address, marker_path):
  """A node whose loop waits on an empty queue; marks when its loop ended."""
  client = reverb.Client(address)
  iterator = replay.StarvationLoggingIterator(
      iter(replay.make_dataset(client, 'queue', batch_size=2)), client,
      'queue')
  launch.run_until_stop(lambda: next(iterator))
  marker_path.write_text('loop ended')


def stop_soon():
  time.sleep(0.5)
  launch.stop()


def test_a_starved_learner_ends_its_loop_when_the_program_stops(
    server_factory, tmp_path):
  # Before: next() waited for a batch that never came, past the notice.
  sig = adders.NStepTransitionAdder.signature(ENV_SPEC)
  client = server_factory([replay.queue_table('queue', 10, signature=sig)])
  program = launch.Program('starved')
  program.add_node(launch.PyNode(starved_learner, client.server_address,
                                 tmp_path / 'ended'))
  program.add_node(launch.PyNode(stop_soon))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=20.0)
  assert launched.wait(timeout=60)
  assert (tmp_path / 'ended').read_text() == 'loop ended'
