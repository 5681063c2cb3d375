"""One small program run under test_mt, local_mt and local_mp, same checks.

Producers write to a Reverb queue and call a consumer's method; each also
calls a batched inference server concurrently (through futures); a checker
node reads what the producers wrote (from the consumer and from Reverb),
records what it saw and stops the program.
"""

import json
import sys
import threading
import time

import cloudpickle
import numpy as np
import pytest

from repertory import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])

NUM_PRODUCERS = 2
ITEMS_PER_PRODUCER = 3
CALLS_PER_PRODUCER = 2
BATCH_SIZE = NUM_PRODUCERS * CALLS_PER_PRODUCER


def make_tables():
  import reverb  # pylint: disable=g-import-not-at-top
  return [reverb.Table.queue('items', max_size=100)]


class Consumer:
  """Collects what the producers send."""

  def __init__(self):
    self._lock = threading.Lock()
    self._items = []
    self._results = {}

  def put(self, producer: int, k: int) -> int:
    with self._lock:
      self._items.append((producer, k))
      return len(self._items)

  def put_results(self, producer: int, results) -> None:
    with self._lock:
      self._results[producer] = results

  def summary(self):
    with self._lock:
      return list(self._items), dict(self._results)


class InferenceServer:
  """Doubles its input, in batches."""

  def __init__(self):
    self._batch_sizes = []

  @launch.batched_handler(batch_size=BATCH_SIZE, timeout=60.0)
  def double(self, x):
    self._batch_sizes.append(int(x.shape[0]))
    return {'y': 2 * x, 'batch': np.full(x.shape[0], x.shape[0])}

  def batch_sizes(self):
    return list(self._batch_sizes)


def produce(index, consumer, replay, server):
  for k in range(ITEMS_PER_PRODUCER):
    replay.insert(np.array([index, k], np.int64), priorities={'items': 1.0})
    consumer.put(index, k)
  futures = [server.futures.double(np.float32(10 * index + j))
             for j in range(CALLS_PER_PRODUCER)]
  results = [f.result(timeout=120) for f in futures]
  consumer.put_results(index, [(float(r['y']), int(r['batch']))
                               for r in results])


def check(consumer, replay, server, out_path):
  deadline = time.monotonic() + 120
  while True:
    items, results = consumer.summary()
    if (len(items) == NUM_PRODUCERS * ITEMS_PER_PRODUCER and
        len(results) == NUM_PRODUCERS):
      break
    if time.monotonic() > deadline:
      raise TimeoutError(f'producers did not finish: {items} {results}')
    time.sleep(0.01)
  size = replay.server_info()['items'].current_size
  replayed = [tuple(int(v) for v in sample[0].data[0])
              for sample in replay.sample('items', num_samples=size)]
  with open(out_path, 'w') as f:
    json.dump({'items': items, 'results': results, 'replayed': replayed,
               'batch_sizes': server.batch_sizes(),
               'reverb_address': replay.server_address,
               'launch_type': launch.get_launch_type()}, f)
  launch.stop()


def make_program(out_path) -> launch.Program:
  program = launch.Program('producers_consumer')
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(make_tables))
  with program.group('inference'):
    server = program.add_node(launch.CourierNode(InferenceServer))
  # Colocations keep the number of processes (each importing TensorFlow for
  # its Reverb client) small: 4 processes in local_mp.
  consumer_node = launch.CourierNode(Consumer)
  consumer = consumer_node.create_handle()
  with program.group('consumer'):
    program.add_node(launch.MultiThreadingColocation([
        consumer_node,
        launch.PyNode(check, consumer, replay, server, str(out_path))]))
  with program.group('producer'):
    program.add_node(launch.MultiThreadingColocation([
        launch.PyNode(produce, i, consumer, replay, server)
        for i in range(NUM_PRODUCERS)]))
  return program


@pytest.mark.parametrize('launch_type', ['test_mt', 'local_mt', 'local_mp'])
def test_program_runs_the_same_in_every_launch_type(launch_type, tmp_path):
  out_path = tmp_path / 'seen.json'
  program = make_program(out_path)
  launched = launch.launch(program, launch_type=launch_type,
                           logdir=str(tmp_path / 'logs'),
                           termination_notice_secs=5)
  if launch_type == 'test_mt':
    assert launched.wait(timeout=120)
  assert not launched.is_running()
  seen = json.loads(out_path.read_text())
  expected = sorted([i, k] for i in range(NUM_PRODUCERS)
                    for k in range(ITEMS_PER_PRODUCER))
  assert sorted(seen['items']) == expected
  assert sorted(list(x) for x in seen['replayed']) == expected
  # One full batch: every concurrent call was stacked into one call.
  assert seen['batch_sizes'] == [BATCH_SIZE]
  for i in range(NUM_PRODUCERS):
    assert seen['results'][str(i)] == [[2.0 * (10 * i + j), BATCH_SIZE]
                                       for j in range(CALLS_PER_PRODUCER)]
  assert seen['launch_type'] == launch_type
  assert ':' in seen['reverb_address']
  if launch_type == 'local_mp':
    logs = sorted(p.name for p in (tmp_path / 'logs').iterdir())
    assert logs == ['consumer_0.log', 'inference_0.log', 'producer_0.log',
                    'replay_0.log']
    assert 'Reverb server of replay/0' in (
        tmp_path / 'logs' / 'replay_0.log').read_text()
