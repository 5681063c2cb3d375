"""The Ray backend on one shared local Ray instance (launch_type='ray').

One Ray start (~5 s) serves every test of this file; local_mp (which starts
and tears down its own instance) is covered by program_test.py and
sigint_test.py.
"""

import logging
import os
import sys
import threading
import time

import cloudpickle
import pytest
import ray

from repertory import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope='module', autouse=True)
def ray_instance():
  ray.init(address='local', _node_ip_address='127.0.0.1',
           include_dashboard=False, num_cpus=2,
           logging_level=logging.WARNING)
  yield
  ray.shutdown()


def boom():
  raise ValueError('boom from the node')


def loop_until_stopped(marker_path):
  while not launch.stop_event().wait(0.01):
    pass
  with open(marker_path, 'w') as f:
    f.write('final checkpoint')


def stop_soon():
  time.sleep(0.1)
  launch.stop()


class Learner:

  def __init__(self, handler_path):
    launch.register_stop_handler(
        lambda: open(handler_path, 'w').write(launch.get_launch_type()))

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
            'env_object': type(self._env).__name__,
            'launch_type': launch.get_launch_type()}

  def echo(self, x):
    return x


class Unpicklable:
  """Stands for an environment: holds a lock, so it cannot be pickled."""

  def __init__(self):
    self.lock = threading.Lock()


def test_a_failing_node_stops_the_program_and_is_named(tmp_path):
  program = launch.Program('failing')
  program.add_node(launch.PyNode(loop_until_stopped, str(tmp_path / 'final')),
                   label='worker')
  program.add_node(launch.PyNode(boom), label='bad')
  with pytest.raises(launch.NodeError) as info:
    launch.launch(program, launch_type='ray', logdir=str(tmp_path / 'logs'))
  error = info.value
  assert error.node_id == 'bad/0' and error.label == 'bad'
  assert 'ValueError: boom from the node' in str(error)
  assert str(tmp_path / 'logs' / 'bad_0.log') in str(error)
  assert 'boom from the node' in (tmp_path / 'logs' / 'bad_0.log').read_text()
  # The other node got its notice and finished cleanly.
  assert (tmp_path / 'final').read_text() == 'final checkpoint'


def test_stop_from_a_node_ends_the_program(tmp_path):
  program = launch.Program('stopping')
  program.add_node(launch.PyNode(loop_until_stopped, str(tmp_path / 'final')))
  program.add_node(launch.PyClassNode(Learner, str(tmp_path / 'handler')))
  program.add_node(launch.PyNode(stop_soon))
  launched = launch.launch(program, launch_type='ray',
                           logdir=str(tmp_path / 'logs'))
  assert not launched.is_running()
  assert (tmp_path / 'final').read_text() == 'final checkpoint'
  assert (tmp_path / 'handler').read_text() == 'ray'
  assert not [a for a in ray.util.list_named_actors(all_namespaces=True)
              if a['namespace'].startswith('repertory-stopping')]


def test_an_unpicklable_argument_is_named_before_anything_starts():
  program = launch.Program('unpicklable')
  with program.group('actor'):
    program.add_node(launch.CourierNode(Where, env=Unpicklable()))
  with pytest.raises(launch.NodePicklingError) as info:
    launch.launch(program, launch_type='ray')
  message = str(info.value)
  assert "'actor/0'" in message and "kwargs['env']" in message
  assert 'Deferred' in message


def test_handles_colocations_resources_and_deferred(tmp_path):
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
      local_resources={'env': {'num_cpus': 1,
                               'env': {'REPERTORY_TEST_VAR': 'set'}}})
  try:
    infos = [h.dereference().info() for h in pair + procs + [env]]
    assert infos[0]['pid'] == infos[1]['pid'] != os.getpid()
    assert infos[2]['pid'] != infos[3]['pid']
    assert infos[2]['ray_node_id'] == infos[3]['ray_node_id']
    assert [i['env_var'] for i in infos] == [None] * 4 + ['set']
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


def test_a_process_that_dies_is_reported_not_waited_for(tmp_path):
  program = launch.Program('dying')
  program.add_node(launch.PyNode(loop_until_stopped, str(tmp_path / 'final')))
  program.add_node(launch.PyNode(os._exit, 3), label='crash')  # pylint: disable=protected-access
  with pytest.raises(launch.NodeError, match='died') as info:
    launch.launch(program, launch_type='ray', logdir=str(tmp_path / 'logs'),
                  termination_notice_secs=5)
  assert info.value.node_id == 'crash/0'
