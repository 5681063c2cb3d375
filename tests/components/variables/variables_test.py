"""Tests for VariableStore and VariableClient."""

import threading

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
