"""`Program.add_program`: a part built as a program of its own joins
another program, and its handles (also those its nodes hold) then call the
nodes there (test_mt: every node in this process)."""

import threading

import pytest

from repertory import launch


class Store:
  """Keeps what it is given."""

  def __init__(self):
    self._lock = threading.Lock()
    self.items = []

  def put(self, item):
    with self._lock:
      self.items.append(item)

  def get(self):
    with self._lock:
      return list(self.items)


def _part(tag):
  """A program of its own: a store and a producer writing to it."""
  part = launch.Program(f'part_{tag}')
  with part.group('store'):
    store = part.add_node(launch.CourierNode(Store))
  with part.group('producer'):
    part.add_node(launch.PyNode(lambda s: s.put(tag), store))
  return part, store


def test_a_parts_nodes_and_handles_join_the_program():
  program = launch.Program('main')
  main_part, main_store = _part('main')
  other, other_store = _part('other')
  program.add_program(main_part)
  program.add_program(other, groups=['store', 'producer'])
  assert {g: len(n) for g, n in program.groups.items()} == {
      'store': 2, 'producer': 2}
  assert [main_store.node_id, other_store.node_id] == ['store/0', 'store/1']
  launched = launch.launch(program, launch_type='test_mt')
  try:
    stores = [main_store.dereference(), other_store.dereference()]
    for store, tag in zip(stores, ('main', 'other')):
      for _ in range(100):
        if store.get():
          break
        threading.Event().wait(0.05)
      assert store.get() == [tag]
  finally:
    assert launched.stop(timeout=30)


def test_a_node_holding_a_left_out_handle_is_refused():
  part, _ = _part('x')
  with pytest.raises(ValueError, match="holds the handle of node 'store/0'"):
    launch.Program('main').add_program(part, groups=['producer'])
  with pytest.raises(ValueError, match=r"no groups \['learner'\]"):
    launch.Program('main').add_program(part, groups=['learner'])


def test_a_placed_program_is_refused():
  part, _ = _part('x')
  part.share_process('store', 'producer')
  with pytest.raises(ValueError, match='was placed'):
    launch.Program('main').add_program(part)


def test_a_colocated_nodes_handle_joins_with_its_colocation():
  # The store runs in a thread colocation (as SEED's inference servers run
  # beside its learner); the producer holds the store's own handle.
  part = launch.Program('part')
  store_node = launch.CourierNode(Store)
  with part.group('learner'):
    [_, store] = part.add_node(launch.MultiThreadingColocation(
        [launch.CourierNode(Store), store_node]))
  with part.group('producer'):
    part.add_node(launch.PyNode(lambda s: s.put('colocated'), store))
  program = launch.Program('main')
  program.add_program(part)
  assert store.node_id is not None
  launched = launch.launch(program, launch_type='test_mt')
  try:
    for _ in range(100):
      if store.dereference().get():
        break
      threading.Event().wait(0.05)
    assert store.dereference().get() == ['colocated']
  finally:
    assert launched.stop(timeout=30)
