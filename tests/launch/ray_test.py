"""The Ray backend (launch_type='ray') on a two-node Ray cluster.

One cluster on this machine (head and worker node, both on 127.0.0.1, with
different custom resources) serves every test of this file, so Ray starts
once; local_mp (which starts and tears down its own instance) is covered by
program_test.py and sigint_test.py.
"""

import os
import sys
import threading
import time

import cloudpickle
import pytest
import ray

from repertory import launch
from repertory import testing
from repertory.launch.backends import local_ray
from repertory.launch.backends import ray_node

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope='module')
def cluster():
  with testing.loopback_ray_cluster(
      num_cpus=1, resources={'head_res': 1}) as cluster:
    cluster.add_node(num_cpus=1, resources={'worker_res': 1},
                     node_ip_address='127.0.0.1')
    yield cluster


@pytest.fixture
def connected(cluster):
  """This process connected to the cluster (launch then reuses the link)."""
  if not ray.is_initialized():
    local_ray.connect(cluster.address)
  yield cluster


def boom():
  raise ValueError('boom from the node')


def loop_until_stopped(marker_path):
  while not launch.stop_event().wait(0.01):
    pass
  with open(marker_path, 'w') as f:
    f.write('final checkpoint')


def stop_soon(ready_path=None):
  """Stops the program (once `ready_path` exists, if given)."""
  deadline = time.monotonic() + 120
  while ready_path and not os.path.exists(ready_path):
    assert time.monotonic() < deadline, f'{ready_path} never appeared'
    time.sleep(0.05)
  time.sleep(0.1)
  launch.stop()


class Learner:

  def __init__(self, handler_path):
    launch.register_stop_handler(
        lambda: open(handler_path, 'w').write(launch.get_launch_type()))
    open(handler_path + '.registered', 'w').close()

  def run(self):
    launch.wait_for_stop(timeout=120)


class Where:
  """Says where it runs."""

  def __init__(self, env=None):
    self._env = env

  def info(self):
    return {'pid': os.getpid(),
            'ray_node_id': ray.get_runtime_context().get_node_id(),
            'env_var': os.environ.get('REPERTORY_TEST_VAR'),
            'cpus': sorted(os.sched_getaffinity(0)),
            'env_object': type(self._env).__name__,
            'launch_type': launch.get_launch_type()}

  def echo(self, x):
    return x


class Unpicklable:
  """Stands for an environment: holds a lock, so it cannot be pickled."""

  def __init__(self):
    self.lock = threading.Lock()


def test_groups_land_on_the_nodes_that_have_their_resources(cluster, tmp_path):
  # Runs first: the launcher connects to the cluster by address itself.
  assert not ray.is_initialized()
  program = launch.Program('placed')
  with program.group('on_head'):
    on_head = [program.add_node(launch.CourierNode(Where)) for _ in range(2)]
  with program.group('on_worker'):
    on_worker = [program.add_node(launch.CourierNode(Where)) for _ in range(2)]
  resources = launch.parse_resources(
      'on_head=head_res:0.5 on_worker=worker_res:0.5')
  launched = launch.launch(program, launch_type='ray',
                           ray_address=cluster.address,
                           local_resources=resources,
                           logdir=str(tmp_path), block=False)
  try:
    nodes = {n['NodeID']: n['Resources'] for n in ray.nodes() if n['Alive']}
    assert len(nodes) == 2
    for handle in on_head:
      assert 'head_res' in nodes[handle.dereference().info()['ray_node_id']]
    for handle in on_worker:
      assert 'worker_res' in nodes[handle.dereference().info()['ray_node_id']]
  finally:
    launched.stop(timeout=60)
  assert not ray.is_initialized()  # the launcher closed its connection.


def test_a_failing_node_stops_the_program_and_is_named(connected, tmp_path):
  program = launch.Program('failing')
  program.add_node(launch.PyNode(loop_until_stopped, str(tmp_path / 'final')),
                   label='worker')
  program.add_node(launch.PyNode(boom), label='bad')
  # The node's own ValueError, also a NodeError naming the node; the note
  # carries its traceback and log file.
  with pytest.raises(ValueError) as info:
    launch.launch(program, launch_type='ray', logdir=str(tmp_path / 'logs'))
  error = info.value
  assert isinstance(error, launch.NodeError)
  assert error.node_id == 'bad/0' and error.label == 'bad'
  assert str(error) == 'boom from the node'
  assert 'ValueError: boom from the node' in error.__notes__[-1]
  assert str(tmp_path / 'logs' / 'bad_0.log') in error.__notes__[-1]
  assert 'boom from the node' in (tmp_path / 'logs' / 'bad_0.log').read_text()
  # The other node got its notice and finished cleanly.
  assert (tmp_path / 'final').read_text() == 'final checkpoint'


def test_stop_from_a_node_ends_the_program(connected, tmp_path):
  program = launch.Program('stopping')
  program.add_node(launch.PyNode(loop_until_stopped, str(tmp_path / 'final')))
  program.add_node(launch.PyClassNode(Learner, str(tmp_path / 'handler')))
  # Stop only once the learner has registered its stop handler (on a busy
  # machine its node may start after a stop sent right away).
  program.add_node(launch.PyNode(stop_soon,
                                 str(tmp_path / 'handler.registered')))
  launched = launch.launch(program, launch_type='ray',
                           logdir=str(tmp_path / 'logs'))
  assert not launched.is_running()
  assert (tmp_path / 'final').read_text() == 'final checkpoint'
  assert (tmp_path / 'handler').read_text() == 'ray'
  assert not [a for a in ray.util.list_named_actors(all_namespaces=True)
              if a['namespace'].startswith('repertory-stopping')]


def test_an_unpicklable_argument_is_named_before_anything_starts(connected):
  program = launch.Program('unpicklable')
  with program.group('actor'):
    program.add_node(launch.CourierNode(Where, env=Unpicklable()))
  with pytest.raises(launch.NodePicklingError) as info:
    launch.launch(program, launch_type='ray')
  message = str(info.value)
  assert "'actor/0'" in message and "kwargs['env']" in message
  assert 'Deferred' in message


def test_handles_colocations_resources_and_deferred(connected, tmp_path):
  program = launch.Program('placement')
  with program.group('threads'):
    pair = program.add_node(launch.MultiThreadingColocation(
        [launch.CourierNode(Where), launch.CourierNode(Where)]))
  with program.group('procs'):
    procs = program.add_node(launch.MultiProcessingColocation(
        [launch.CourierNode(Where), launch.CourierNode(Where)]))
  with program.group('env'):
    env = program.add_node(launch.CourierNode(
        Where, env=launch.Deferred(Unpicklable)))
  launched = launch.launch(
      program, launch_type='ray', logdir=str(tmp_path / 'logs'), block=False,
      local_resources={'env': {'num_cpus': 1, 'cpus': [0],
                               'env': {'REPERTORY_TEST_VAR': 'set'}}})
  try:
    infos = [h.dereference().info() for h in pair + procs + [env]]
    assert infos[0]['pid'] == infos[1]['pid'] != os.getpid()
    assert infos[2]['pid'] != infos[3]['pid']
    assert infos[2]['ray_node_id'] == infos[3]['ray_node_id']
    assert [i['env_var'] for i in infos] == [None] * 4 + ['set']
    # Pinned to core 0 (by the node's thread too); the others are not.
    assert [i['cpus'] for i in infos] == (
        [sorted(os.sched_getaffinity(0))] * 4 + [[0]])
    assert infos[4]['env_object'] == 'Unpicklable'
    assert {i['launch_type'] for i in infos} == {'ray'}
    client = env.dereference()
    futures = [client.futures.echo(i) for i in range(50)]
    assert [f.result(timeout=60) for f in futures] == list(range(50))
    with pytest.raises(AttributeError, match="no public method 'nope'"):
      client.nope()
  finally:
    launched.stop(timeout=60)
  assert sorted(os.listdir(tmp_path / 'logs')) == [
      'env_0.log', 'procs_0.0.log', 'procs_0.1.log', 'threads_0.log']


class StartsOrNot:
  """Stands for a `NodeActor` whose `start` raises, returns, or kills its
  process."""

  def start(self, how):
    if how == 'raise':
      raise RuntimeError('cannot start a thread')
    if how == 'die':
      os._exit(3)  # pylint: disable=protected-access
    return {'pid': os.getpid()}


def test_a_start_that_raised_is_the_units_error(connected):
  del connected
  refs = {how: ray.remote(StartsOrNot).remote().start.remote(how)
          for how in ('raise', 'return', 'die')}
  ray.wait(list(refs.values()), num_returns=3, timeout=120)
  error = ray_node.start_error(refs['raise'], 'actor', 'actor_0',
                                  '/logs/actor_0.log')
  assert isinstance(error, launch.NodeError)
  assert (error.label, error.node_id) == ('actor', 'actor_0')
  assert 'could not start its nodes' in str(error)
  assert 'cannot start a thread' in str(error)
  # A start that returned is no error; a process that died is the watch's.
  assert ray_node.start_error(refs['return'], 'actor', 'a', None) is None
  assert ray_node.start_error(refs['die'], 'actor', 'a', None) is None


def test_a_process_that_dies_is_reported_not_waited_for(connected, tmp_path):
  program = launch.Program('dying')
  program.add_node(launch.PyNode(loop_until_stopped, str(tmp_path / 'final')))
  program.add_node(launch.PyNode(os._exit, 3), label='crash')  # pylint: disable=protected-access
  with pytest.raises(launch.NodeError, match='died') as info:
    launch.launch(program, launch_type='ray', logdir=str(tmp_path / 'logs'),
                  termination_notice_secs=5)
  assert info.value.node_id == 'crash/0'
