"""batched_handler: concurrent calls are stacked, run once, split back."""

import collections
import threading

import numpy as np
import pytest

from repertory import launch

Out = collections.namedtuple('Out', ['doubled', 'total'])


def call_concurrently(fn, inputs):
  """Calls fn(x) for every x from its own thread; returns the results."""
  results = [None] * len(inputs)
  errors = [None] * len(inputs)

  def worker(i):
    try:
      results[i] = fn(inputs[i])
    except Exception as e:  # pylint: disable=broad-except
      errors[i] = e
  threads = [threading.Thread(target=worker, args=(i,))
             for i in range(len(inputs))]
  for t in threads:
    t.start()
  for t in threads:
    t.join(180)
  return results, errors


class Doubler:

  def __init__(self):
    self.shapes = []

  @launch.batched_handler(batch_size=4, timeout=30.0)
  def double(self, x):
    self.shapes.append(x.shape)
    return 2 * x


def test_concurrent_calls_are_stacked_into_one_batch():
  server = Doubler()
  inputs = [np.array([i, i + 1], np.float32) for i in range(4)]
  results, errors = call_concurrently(server.double, inputs)
  assert errors == [None] * 4
  assert server.shapes == [(4, 2)]
  for x, y in zip(inputs, results):
    np.testing.assert_array_equal(y, 2 * x)


class ThreadRecorder:

  def __init__(self):
    self.threads = []

  @launch.batched_handler(batch_size=3, timeout=30.0)
  def record(self, x):
    self.threads.append(threading.current_thread().name)
    return x


def test_the_call_that_fills_a_batch_runs_it_on_its_own_thread():
  # No hand-off to the dispatcher thread and back for a full batch.
  server = ThreadRecorder()
  names = {}

  def call(i):
    names[i] = threading.current_thread().name
    return server.record(np.array(i))

  results, errors = call_concurrently(call, [0, 1, 2])
  assert errors == [None] * 3 and [int(r) for r in results] == [0, 1, 2]
  assert len(server.threads) == 1
  assert server.threads[0] in names.values()


def test_partial_batch_runs_when_the_timeout_expires():

  class Server:

    def __init__(self):
      self.sizes = []

    @launch.batched_handler(batch_size=64, timeout=0.05)
    def f(self, x):
      self.sizes.append(len(x))
      return x + 1
  server = Server()
  results, errors = call_concurrently(server.f, [1, 2, 3])
  assert errors == [None] * 3
  assert results == [2, 3, 4]
  assert sum(server.sizes) == 3 and max(server.sizes) <= 3


def test_nested_arguments_keyword_arguments_and_nested_results():

  class Server:

    @launch.batched_handler(batch_size=3, timeout=30.0)
    def f(self, obs, scale=None):
      assert obs['a'].shape == (3, 2) and obs['b'][0].shape == (3,)
      doubled = {'a': obs['a'] * scale[:, None], 'b': obs['b'][0] * scale}
      return Out(doubled=doubled, total=obs['a'].sum(axis=1) + obs['b'][0])
  server = Server()
  inputs = [({'a': np.full(2, i, np.float32), 'b': (np.float32(i),)}, i + 1)
            for i in range(3)]
  results, errors = call_concurrently(
      lambda xs: server.f(xs[0], scale=np.float32(xs[1])), inputs)
  assert errors == [None] * 3
  for i, result in enumerate(results):
    assert isinstance(result, Out)
    np.testing.assert_array_equal(result.doubled['a'], [i * (i + 1)] * 2)
    assert result.doubled['b'] == i * (i + 1)
    assert result.total == 3 * i


def test_pad_batch_pads_to_batch_size_and_returns_the_real_rows():

  class Server:

    def __init__(self):
      self.shapes = []

    @launch.batched_handler(batch_size=4, timeout=0.0, pad_batch=True)
    def f(self, x):
      self.shapes.append(x.shape)
      return x * 10
  server = Server()
  assert server.f(np.int32(3)) == 30
  assert server.shapes == [(4,)]


def test_an_error_in_the_batched_method_reaches_every_caller():

  class Server:

    @launch.batched_handler(batch_size=2, timeout=30.0)
    def f(self, x):
      raise RuntimeError(f'bad batch {x.tolist()}')
  results, errors = call_concurrently(Server().f, [1, 2])
  assert results == [None, None]
  assert all(isinstance(e, RuntimeError) and 'bad batch' in str(e)
             for e in errors)


@pytest.mark.parametrize('result', [{'scalar': np.float32(1.0)},
                                    np.zeros(())])
def test_results_without_a_batch_dimension_are_rejected(result):

  class Server:

    @launch.batched_handler(batch_size=1, timeout=0.0)
    def f(self, x):
      del x
      return result
  with pytest.raises(ValueError, match='leading dimension'):
    Server().f(np.zeros(3))


@pytest.mark.parametrize('batch_size', [1, 2])
def test_the_batch_holds_copies_of_the_callers_arguments(batch_size):

  class Server:

    @launch.batched_handler(batch_size=batch_size, timeout=30.0)
    def f(self, x, y=None):
      x[:] = -1  # Writing into the batch leaves the callers' arrays alone.
      y['a'][:] = -1
      return x
  inputs = [np.arange(3.0) + i for i in range(batch_size)]
  nested = [{'a': np.ones(2)} for _ in range(batch_size)]
  server = Server()
  results, errors = call_concurrently(
      lambda i: server.f(inputs[i], y=nested[i]), list(range(batch_size)))
  assert errors == [None] * batch_size
  for i in range(batch_size):
    np.testing.assert_array_equal(results[i], [-1, -1, -1])
    np.testing.assert_array_equal(inputs[i], np.arange(3.0) + i)
    np.testing.assert_array_equal(nested[i]['a'], [1, 1])


def test_calls_of_different_structures_are_rejected():

  class Server:

    @launch.batched_handler(batch_size=2, timeout=30.0)
    def f(self, x):
      return x
  _, errors = call_concurrently(Server().f, [1, (1, 2)])
  assert all(isinstance(e, ValueError) and 'same structure' in str(e)
             for e in errors)


def test_max_parallelism_runs_batches_at_the_same_time():
  # Generous: under CI load a thread can wait long for the GIL; a handler
  # that ran batches one after the other would never pass the barrier.
  barrier = threading.Barrier(2, timeout=120)

  class Server:

    @launch.batched_handler(batch_size=1, timeout=0.0, max_parallelism=2)
    def f(self, x):
      barrier.wait()  # Passes only if two batches run concurrently.
      return x
  results, errors = call_concurrently(Server().f, [1, 2])
  assert errors == [None, None]
  assert results == [1, 2]


def test_each_instance_batches_its_own_calls():
  a, b = Doubler(), Doubler()
  results, _ = call_concurrently(
      lambda i: (a if i % 2 else b).double(np.float32(i)), list(range(8)))
  assert results == [2.0 * i for i in range(8)]
  assert a.shapes == [(4,)] and b.shapes == [(4,)]


@pytest.mark.parametrize('kwargs', [
    dict(batch_size=0, timeout=1.0),
    dict(batch_size=2, timeout=-1.0),
    dict(batch_size=2, timeout=1.0, max_parallelism=0),
])
def test_bad_configuration_is_rejected(kwargs):
  with pytest.raises(ValueError):
    launch.batched_handler(**kwargs)


def test_call_batch_runs_the_given_calls_as_one_batch_on_this_thread():
  threads = []

  def scale(x, k):  # [B, 2] and [B]
    threads.append(threading.current_thread())
    return x * k[:, None]

  batched = launch.batched_handler(batch_size=3, timeout=600.0)(scale)
  results = batched.call_batch([(np.ones(2), 3), (np.full(2, 2.0), 5)])
  np.testing.assert_array_equal(results[0], [3.0, 3.0])
  np.testing.assert_array_equal(results[1], [10.0, 10.0])
  assert threads == [threading.current_thread()]
  assert (batched.batch_size, batched.timeout) == (3, 600.0)
  with pytest.raises(ValueError, match='1 to 3 calls, got 4'):
    batched.call_batch([(np.ones(1), 0)] * 4)


class LaunchpadSummer:
  """Launchpad's batching example's server: a list argument `[x, x + 1]`
  arrives as one `[B, 2]` array, whatever the batch size `B`."""

  def __init__(self, batch_size: int, timeout: float):
    self.sum = None
    self.shapes = []
    self.compute = launch.batched_handler(
        batch_size=batch_size, timeout=timeout)(self.compute)

  def compute(self, values):
    self.shapes.append(np.shape(values))
    result = np.sum(values, axis=0)
    self.sum = result if self.sum is None else self.sum + result
    return np.tile(self.sum, (len(values), 1))


def test_a_partial_batch_has_the_structure_of_a_full_one():
  # A first call alone (a partial batch once the timeout passed), then
  # two together: under a leaf-wise stacking of the list the partial
  # batch's sum would have shape (1,) and every later batch would fail.
  # (A timeout long enough that the two together are never split.)
  server = LaunchpadSummer(batch_size=2, timeout=3.0)
  np.testing.assert_array_equal(server.compute([1, 2]), [1, 2])
  results, errors = call_concurrently(server.compute, [[3, 4], [5, 6]])
  assert errors == [None, None]
  for result in results:
    np.testing.assert_array_equal(result, [9, 12])
  assert server.shapes == [(1, 2), (2, 2)]


def test_lists_that_are_not_of_numbers_stay_nests():

  class Server:

    @launch.batched_handler(batch_size=2, timeout=30.0)
    def f(self, pair):
      assert isinstance(pair, list) and pair[0].shape == (2, 3)
      return pair[0].sum(axis=1) + pair[1]
  inputs = [[np.full(3, i, np.float32), np.float32(i)] for i in range(2)]
  results, errors = call_concurrently(Server().f, inputs)
  assert errors == [None, None]
  assert [float(r) for r in results] == [0.0, 4.0]
