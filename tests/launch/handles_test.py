"""Programs, handles and clients, in threads (test_mt)."""

import collections
import dataclasses
import threading
import time

import pytest

from repertory import launch

Pair = collections.namedtuple('Pair', ['first', 'second'])


@dataclasses.dataclass
class Config:
  peer: object
  scale: int = 2


class Counter:
  """A courier node with a background run loop."""

  def __init__(self, start: int = 0, delay: float = 0.0):
    time.sleep(delay)  # a server that comes up late
    self._value = start
    self.ticks = 0
    self._lock = threading.Lock()

  def add(self, n: int) -> int:
    with self._lock:
      self._value += n
      return self._value

  def value(self) -> int:
    return self._value

  def ticks_so_far(self) -> int:
    return self.ticks

  def _private(self):
    return 'secret'

  def run(self):
    while not launch.stop_event().wait(0.001):
      self.ticks += 1


class Holder:
  """Keeps whatever it was built with (clients, built objects)."""

  def __init__(self, *args, **kwargs):
    self.args = args
    self.kwargs = kwargs

  def peer_values(self):
    pair, config, clients, env = (self.args[0], self.kwargs['config'],
                                  self.kwargs['clients'], self.kwargs['env'])
    assert isinstance(pair, Pair) and isinstance(config, Config)
    return [pair.first.add(1), pair.second.value(), config.peer.value(),
            clients['a'][0].value(), env]


class Env:
  """Stands for an environment that cannot be pickled."""

  def __init__(self, name, peer):
    self.name = name
    self.peer_value = peer.value()
    self.lock = threading.Lock()


@pytest.fixture
def running():
  programs = []

  def start(program):
    launched = launch.launch(program, launch_type='test_mt',
                             termination_notice_secs=5)
    programs.append(launched)
    return launched
  yield start
  for launched in programs:
    launched.stop(timeout=30)


def test_using_a_handle_without_dereferencing_it_fails_with_a_hint():
  program = launch.Program('p')
  counter = program.add_node(launch.CourierNode(Counter))
  with pytest.raises(launch.NotDereferencedError,
                     match='dereference the handle inside a node'):
    counter.add(1)
  with pytest.raises(AttributeError, match='dereference the handle'):
    counter.futures.add(1)  # pylint: disable=pointless-statement


def test_dereferenced_handles_call_methods_blocking_and_with_futures(running):
  program = launch.Program('p')
  counter = program.add_node(launch.CourierNode(Counter, 10, delay=0.2))
  running(program)
  client = counter.dereference()
  assert client.add(5) == 15  # waits for the server to come up
  futures = [client.futures.add(1) for _ in range(10)]
  assert sorted(f.result(timeout=30) for f in futures) == list(range(16, 26))
  assert client.value() == 25
  # run() runs in the background while methods are served.
  deadline = time.monotonic() + 30
  while client.ticks_so_far() == 0 and time.monotonic() < deadline:
    time.sleep(0.01)
  assert client.ticks_so_far() > 0
  with pytest.raises(AttributeError, match="no public method 'nope'"):
    client.nope()
  with pytest.raises(AttributeError):
    client._private()  # pylint: disable=protected-access


def test_handles_nested_in_arguments_and_deferred_objects_are_resolved(
    running):
  program = launch.Program('p')
  with program.group('counter'):
    a = program.add_node(launch.CourierNode(Counter, 1))
    b = program.add_node(launch.CourierNode(Counter, 2))
  holder = program.add_node(launch.CourierNode(
      Holder, Pair(a, b), config=Config(peer=b),
      clients={'a': [a]}, env=launch.Deferred(Env, 'cartpole', peer=b)))
  running(program)
  values = holder.dereference().peer_values()
  assert values[:4] == [2, 2, 2, 2]
  env = values[4]
  assert isinstance(env, Env) and env.name == 'cartpole' and env.peer_value == 2


def test_disable_run_builds_without_running():
  program = launch.Program('p')
  node = launch.CourierNode(Counter)
  node.disable_run()
  counter = program.add_node(node)
  launched = launch.launch(program, launch_type='test_mt')
  client = counter.dereference()
  assert client.add(3) == 3
  time.sleep(0.05)
  assert client.ticks_so_far() == 0
  launched.stop(timeout=30)


def test_reverb_node_handle_becomes_a_reverb_client(running):
  import reverb  # pylint: disable=g-import-not-at-top

  def tables():
    return [reverb.Table.queue('q', max_size=10)]
  program = launch.Program('p')
  replay = program.add_node(launch.ReverbNode(tables))
  running(program)
  client = replay.dereference()
  assert isinstance(client, reverb.Client)
  client.insert([1.0], priorities={'q': 1.0})
  assert client.server_info()['q'].current_size == 1
  assert client.server_address.startswith('localhost:')


def test_colocations_return_one_handle_per_node(running):
  program = launch.Program('p')
  with program.group('pair'):
    handles = program.add_node(launch.MultiThreadingColocation(
        [launch.CourierNode(Counter, 1), launch.CourierNode(Counter, 2)]))
  with program.group('procs'):
    more = program.add_node(launch.MultiProcessingColocation(
        [launch.CourierNode(Counter, 3), launch.CourierNode(Counter, 4)]))
  assert [h.node_id for h in handles] == ['pair/0.0', 'pair/0.1']
  assert [h.node_id for h in more] == ['procs/0.0', 'procs/0.1']
  running(program)
  assert [h.dereference().value() for h in handles + more] == [1, 2, 3, 4]


def report(*args):
  del args


def test_program_groups_labels_and_ids():
  program = launch.Program('p')
  with program.group('actor'):
    handles = [program.add_node(launch.PyNode(report, i)) for i in range(3)]
  learner_node = launch.CourierNode(Counter)
  learner = program.add_node(learner_node, label='learner')
  loose = program.add_node(launch.PyNode(report))
  assert [h.node_id for h in handles] == ['actor/0', 'actor/1', 'actor/2']
  assert learner.node_id == 'learner/0' and learner.label == 'learner'
  assert loose.node_id == 'report/0'
  assert list(program.groups) == ['actor', 'learner', 'report']
  assert program.groups['learner'] == [learner_node]
  assert learner_node.create_handle() is learner
  with pytest.raises(ValueError, match='already added'):
    program.add_node(learner_node)
  with pytest.raises(ValueError, match='nested'):
    with program.group('a'):
      with program.group('b'):
        pass
  with pytest.raises(ValueError, match='label'):
    program.add_node(launch.PyNode(report), label='bad label')
  with pytest.raises(TypeError, match='add_node takes a node'):
    program.add_node(Counter)


def test_py_node_handles_cannot_be_dereferenced(running):
  program = launch.Program('p')
  stop = threading.Event()
  waiter = program.add_node(launch.PyNode(stop.wait, 30))
  running(program)
  with pytest.raises(launch.LaunchError, match='only CourierNode and Reverb'):
    waiter.dereference()
  stop.set()


def test_a_handle_outside_a_running_program_cannot_be_dereferenced():
  program = launch.Program('p')
  counter = program.add_node(launch.CourierNode(Counter))
  with pytest.raises(launch.LaunchError, match='not running'):
    counter.dereference()
  with pytest.raises(launch.LaunchError, match='add_node'):
    launch.CourierNode(Counter).create_handle().dereference()


def test_reverb_node_writes_a_final_checkpoint_when_the_program_stops(
    tmp_path):
  import reverb  # pylint: disable=g-import-not-at-top

  def tables():
    return [reverb.Table.queue('q', max_size=10)]

  def checkpointer():
    return reverb.checkpointers.DefaultCheckpointer(str(tmp_path / 'ckpt'))
  program = launch.Program('p')
  replay = program.add_node(launch.ReverbNode(
      tables, checkpoint_ctor=checkpointer, checkpoint_time_delta_minutes=60))
  launched = launch.launch(program, launch_type='test_mt')
  replay.dereference().insert([1.0], priorities={'q': 1.0})
  assert not (tmp_path / 'ckpt').exists()
  launched.stop(timeout=60)
  assert list((tmp_path / 'ckpt').iterdir())  # the final checkpoint
  # As Launchpad (and Acme): a period without a checkpointer uses Reverb's
  # default one; a period that is not positive is refused.
  launch.ReverbNode(tables, checkpoint_time_delta_minutes=5)
  with pytest.raises(ValueError, match='must be > 0'):
    launch.ReverbNode(tables, checkpoint_time_delta_minutes=0)
