"""Tests for VariableStore and VariableClient."""

import gc
import threading
import time

import numpy as np
import pytest

from repertory.components.variables import VariableClient
from repertory.components.variables import VariableStore


def test_store_versions_and_copies():
  store = VariableStore({'policy': {'w': np.zeros(3)}})
  assert store.get_variables(['policy']).version == 0
  w = np.ones(3)
  assert store.publish({'policy': {'w': w}}) == 1
  w[:] = 5.0  # mutating the learner's array must not change what is served
  version, [policy] = store.get_variables(['policy'])
  assert version == 1
  np.testing.assert_array_equal(policy['w'], np.ones(3))


def test_store_unknown_name_lists_known():
  store = VariableStore({'policy': np.zeros(1)})
  with pytest.raises(KeyError, match='policy'):
    store.get_variables(['value'])


def test_client_fetches_every_period():
  store = VariableStore({'policy': np.zeros(1)})
  client = VariableClient(store, 'policy', update_period=3,
                          asynchronous=False)
  client.update(wait=True)
  assert client.version == 0
  store.publish({'policy': np.ones(1)})
  client.update()
  client.update()
  assert client.version == 0  # period not reached yet
  client.update()
  assert client.version == 1
  np.testing.assert_array_equal(client.params, np.ones(1))
  client.close()


class _BlockingSource:
  """A real store whose get_variables waits on a barrier (an async check)."""

  def __init__(self):
    self.store = VariableStore({'policy': np.zeros(1)})
    self.release = threading.Event()

  def get_variables(self, names):
    assert self.release.wait(10)
    return self.store.get_variables(names)


def test_client_async_update_never_blocks():
  source = _BlockingSource()
  client = VariableClient(source, ['policy'], update_period=1)
  source.store.publish({'policy': np.ones(1)})
  for _ in range(5):  # fetch in flight and blocked: update returns anyway
    client.update()
  assert client.version == -1
  source.release.set()
  assert client.wait_for_version(1, timeout_s=5) == 1
  assert client.variables['policy'][0] == 1.0
  client.close()


def test_wait_for_version_times_out_with_message():
  store = VariableStore({'policy': np.zeros(1)})
  client = VariableClient(store, 'policy')
  with pytest.raises(TimeoutError, match='version 3'):
    client.wait_for_version(3, timeout_s=0.1)
  client.close()


def test_bad_source_is_explained():
  with pytest.raises(TypeError, match='get_variables'):
    VariableClient(object(), 'policy')


def test_store_reset_sets_the_version_and_wakes_waiters():
  store = VariableStore({'policy': np.zeros(2), 'other': np.zeros(1)})
  store.publish({'policy': np.ones(2)})
  woke = []
  waiter = threading.Thread(
      target=lambda: woke.append(store.wait_for_version(40, timeout_s=10)))
  waiter.start()
  weights = np.full(2, 7.0)
  assert store.reset({'policy': weights}, 42) == 42
  weights[:] = 0.0  # The store holds a copy.
  waiter.join(10)
  assert woke == [42]
  version, [policy, other] = store.get_variables(['policy', 'other'])
  assert version == 42
  np.testing.assert_array_equal(policy, np.full(2, 7.0))
  np.testing.assert_array_equal(other, np.zeros(1))  # Untouched group.
  assert store.publish({'policy': np.ones(2)}) == 43  # Counts on from there.
  store.reset({'policy': np.ones(2)}, 3)  # May go back (a new run's store).
  assert store.version == 3


@pytest.mark.parametrize('variables, version, match', [
    ({}, 1, 'non-empty dict'), ({'policy': np.zeros(1)}, -1, 'version >= 0'),
    ({'policy': np.zeros(1)}, 1.5, 'version >= 0')])
def test_store_reset_rejects_bad_input(variables, version, match):
  store = VariableStore({'policy': np.zeros(1)})
  with pytest.raises(ValueError, match=match):
    store.reset(variables, version)
  assert store.version == 0


def _fetch_threads():
  return [t for t in threading.enumerate()
          if t.name == 'variable_client_fetch' and t.is_alive()]


def _wait_until(predicate, timeout_s=10.0):
  deadline = time.monotonic() + timeout_s
  while not predicate() and time.monotonic() < deadline:
    time.sleep(0.01)
  return predicate()


def test_client_fetches_on_one_thread_that_close_ends():
  before = len(_fetch_threads())
  store = VariableStore({'policy': np.zeros(1)})
  client = VariableClient(store, 'policy', update_period=1)
  for version in range(1, 6):
    store.publish({'policy': np.full(1, float(version))})
    client.update(wait=True)
    assert client.version == version
  # Ray records a task event for the first calls from each new thread: all
  # fetches share one thread.
  assert len(_fetch_threads()) == before + 1
  client.close()
  assert _wait_until(lambda: len(_fetch_threads()) == before)


def test_fetch_thread_ends_when_the_client_is_collected():
  before = len(_fetch_threads())
  client = VariableClient(VariableStore({'policy': np.zeros(1)}), 'policy')
  client.update(wait=True)
  assert len(_fetch_threads()) == before + 1
  del client
  gc.collect()
  assert _wait_until(lambda: len(_fetch_threads()) == before)


def test_fetch_errors_reach_the_caller_and_the_thread_serves_on():
  store = VariableStore({'policy': np.zeros(1)})
  client = VariableClient(store, 'value')  # Not served: KeyError.
  with pytest.raises(KeyError, match='value'):
    client.update(wait=True)
  store.publish({'value': np.ones(1)})
  client.update(wait=True)
  assert client.version == 1
  client.close()


class _CountingStore(VariableStore):
  """Records whether each channel fetch carried weights."""

  def __init__(self, *args):
    super().__init__(*args)
    self.served = []

  def get_variables_if_newer(self, names, version):
    result = super().get_variables_if_newer(names, version)
    self.served.append(result is not None)
    return result


def test_tcp_transport_fetches_new_versions_and_skips_unchanged_ones():
  store = _CountingStore({'policy': np.zeros(2)})
  client = VariableClient(store, 'policy', update_period=1, transport='tcp')
  client.update(wait=True)
  assert client.version == 0
  client.update(wait=True)  # Unchanged: no weights travel.
  assert client.version == 0
  np.testing.assert_array_equal(client.params, np.zeros(2))
  store.publish({'policy': np.ones(2)})
  client.update(wait=True)
  assert client.version == 1
  np.testing.assert_array_equal(client.params, np.ones(2))
  assert store.served == [True, False, True]
  client.close()
  store.close()


class _Restartable:
  """A learner whose process can restart: replace `store` by a new one (a
  new store on a new address)."""

  def __init__(self, store: VariableStore):
    self.store = store

  def get_variables(self, names):
    return self.store.get_variables(names)

  def variables_channel_address(self):
    return self.store.variables_channel_address()


def test_tcp_transport_reconnects_to_a_restarted_source():
  source = _Restartable(VariableStore({'policy': np.zeros(1)}))
  client = VariableClient(source, 'policy', transport='tcp')
  client.update(wait=True)
  old = source.store
  source.store = VariableStore({'policy': np.full(1, 5.0)}, version=7)
  old.close()
  client.update(wait=True)
  assert client.version == 7
  np.testing.assert_array_equal(client.params, np.full(1, 5.0))
  client.close()
  source.store.close()


class _BlockingStore(VariableStore):
  """A store whose channel answers wait on `release` (an async check)."""

  def __init__(self, *args):
    super().__init__(*args)
    self.release = threading.Event()
    self.release.set()

  def get_variables_if_newer(self, names, version):
    assert self.release.wait(10)
    return super().get_variables_if_newer(names, version)


def test_tcp_client_sends_on_a_due_update_and_reads_the_reply_later():
  before = len(_fetch_threads())
  store = _BlockingStore({'policy': np.zeros(1)})
  client = VariableClient(store, 'policy', update_period=2, transport='tcp')
  client.update(wait=True)
  assert client.version == 0
  store.release.clear()  # The store answers nothing until released.
  store.publish({'policy': np.ones(1)})
  started = time.monotonic()
  for _ in range(6):  # The second call sends; none waits for the reply.
    client.update()
  assert time.monotonic() - started < 5
  assert client.version == 0
  store.release.set()
  assert _wait_until(lambda: client.update() or client.version == 1)
  np.testing.assert_array_equal(client.params, np.ones(1))
  assert len(_fetch_threads()) == before  # All on the calling thread.
  client.close()
  store.close()


def test_tcp_client_reconnects_when_the_source_restarts_mid_fetch():
  source = _Restartable(_BlockingStore({'policy': np.zeros(1)}))
  client = VariableClient(source, 'policy', transport='tcp')
  client.update(wait=True)
  old = source.store
  old.release.clear()
  client.update()  # A request in flight that the old store never answers.
  source.store = VariableStore({'policy': np.full(1, 5.0)}, version=7)
  # Closing shuts the old store's connections at once, then waits for its
  # blocked answer.
  closer = threading.Thread(target=old.close)
  closer.start()
  assert _wait_until(lambda: client.update() or client.version == 7)
  old.release.set()
  closer.join()
  np.testing.assert_array_equal(client.params, np.full(1, 5.0))
  client.close()
  source.store.close()


def test_bad_transport():
  with pytest.raises(ValueError, match=r"transport='grpc'; choose one of"):
    VariableClient(VariableStore(), 'policy', transport='grpc')


class _ThreadRecordingStore(VariableStore):
  """Records the thread of each fetch."""

  def __init__(self, *args):
    super().__init__(*args)
    self.threads = []

  def get_variables(self, names):
    self.threads.append(threading.current_thread())
    return super().get_variables(names)

  def get_variables_if_newer(self, names, version):
    self.threads.append(threading.current_thread())
    return super().get_variables_if_newer(names, version)


@pytest.mark.parametrize('transport', ['handle', 'tcp'])
def test_synchronous_client_fetches_on_the_calling_thread(transport):
  before = len(_fetch_threads())
  store = _ThreadRecordingStore({'policy': np.zeros(1)})
  client = VariableClient(store, 'policy', update_period=2,
                          asynchronous=False, transport=transport)
  client.update(wait=True)
  assert client.version == 0
  store.publish({'policy': np.ones(1)})
  client.update()
  assert client.version == 0  # The period is 2 calls.
  client.update()
  assert client.version == 1
  np.testing.assert_array_equal(client.params, np.ones(1))
  assert len(_fetch_threads()) == before  # No fetch thread was started.
  if transport == 'handle':
    assert store.threads == [threading.current_thread()] * 2
  else:  # The store's channel thread answers.
    assert store.threads and threading.current_thread() not in store.threads
  client.close()
  store.close()


class _AnswersAtOnce(_ThreadRecordingStore):
  ANSWERS_AT_ONCE = True


class _AnswersAnyAttribute(_ThreadRecordingStore):
  """A handle-like source: any attribute it lacks is a (truthy) call."""

  def __getattr__(self, name):
    return lambda *args: None


@pytest.mark.parametrize('source, on_caller', [
    (_AnswersAtOnce, True), (_AnswersAnyAttribute, False),
    (_ThreadRecordingStore, False)])
def test_a_source_that_answers_at_once_is_fetched_on_the_calling_thread(
    source, on_caller):
  store = source({'policy': np.zeros(1)})
  client = VariableClient(store, 'policy')
  client.update(wait=True)
  assert client.version == 0
  assert (store.threads == [threading.current_thread()]) == on_caller
  client.close()
  store.close()
