"""Stopping, failures and launch() arguments, in threads."""

import time

import pytest

from repertory import launch


def boom():
  raise ValueError('boom from the node')


def loop_until_stopped(marker_path):
  while not launch.stop_event().is_set():
    time.sleep(0.001)
  # The termination notice: time to write a final checkpoint.
  with open(marker_path, 'w') as f:
    f.write('final checkpoint')


def stop_after(n):
  for _ in range(n):
    time.sleep(0.001)
  launch.stop()


class Learner:

  def __init__(self, handler_path):
    launch.register_stop_handler(
        lambda: open(handler_path, 'w').write(launch.get_launch_type()))

  def run(self):
    launch.wait_for_stop(timeout=60)


@pytest.mark.parametrize('launch_type', ['test_mt', 'local_mt'])
def test_a_failing_node_stops_the_program_and_is_named(launch_type, tmp_path):
  program = launch.Program('failing')
  program.add_node(launch.PyNode(loop_until_stopped, tmp_path / 'final'),
                   label='worker')
  program.add_node(launch.PyNode(boom), label='bad')
  # The node's own exception, as Launchpad's wait() raises it; it is also a
  # NodeError naming the node, with the node's traceback in a note.
  with pytest.raises(ValueError) as info:
    launched = launch.launch(program, launch_type=launch_type)
    launched.wait(timeout=60)
  error = info.value
  assert str(error) == 'boom from the node'
  assert isinstance(error, launch.NodeError)
  assert error.node_id == 'bad/0' and error.label == 'bad'
  assert "Node 'bad/0'" in error.__notes__[-1]
  assert 'ValueError: boom from the node' in error.__notes__[-1]
  assert (tmp_path / 'final').read_text() == 'final checkpoint'


@pytest.mark.parametrize('launch_type', ['test_mt', 'local_mt'])
def test_stop_from_a_node_ends_the_program(launch_type, tmp_path):
  program = launch.Program('stopping')
  program.add_node(launch.PyNode(loop_until_stopped, tmp_path / 'final'))
  program.add_node(launch.PyClassNode(Learner, tmp_path / 'handler'))
  program.add_node(launch.PyNode(stop_after, 10))
  launched = launch.launch(program, launch_type=launch_type)
  assert launched.wait(timeout=60)
  assert (tmp_path / 'final').read_text() == 'final checkpoint'
  assert (tmp_path / 'handler').read_text() == launch_type


def test_the_program_ends_when_every_node_finished():
  program = launch.Program('finite')
  for i in range(3):
    program.add_node(launch.PyNode(time.sleep, 0.01 * i))
  launched = launch.launch(program, launch_type='local_mt')
  assert not launched.is_running()


def test_a_node_that_ignores_the_notice_is_abandoned_after_it():
  program = launch.Program('stubborn')
  program.add_node(launch.PyNode(time.sleep, 3600))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=0.1)
  assert launched.stop(timeout=30)


def test_outside_a_program_there_is_no_launch_type_and_no_stop():
  assert launch.get_launch_type() is None
  with pytest.raises(RuntimeError, match='No launched program'):
    launch.stop()


def test_bad_launch_arguments_name_the_valid_choices():
  program = launch.Program('p')
  with program.group('actor'):
    program.add_node(launch.PyNode(print))
  with pytest.raises(ValueError, match="'local_mp', 'test_mp', 'ray'"):
    launch.launch(program, launch_type='threads')
  with pytest.raises(ValueError, match=r"groups are \['actor'\]"):
    launch.launch(program, launch_type='test_mt',
                  local_resources={'learner': {'num_cpus': 1}})
  with pytest.raises(ValueError, match='valid keys'):
    launch.launch(program, launch_type='test_mt',
                  local_resources={'actor': {'cores': 1}})
  with pytest.raises(ValueError, match='valid terminals'):
    launch.launch(program, launch_type='test_mt', terminal='tmux')
  with pytest.raises(ValueError, match='Program name'):
    launch.Program('')


def test_parse_resources():
  assert launch.parse_resources('learner=cpu:1,gpu:1 actor=cpu:0.5,my_res:2') == {
      'learner': {'num_cpus': 1.0, 'num_gpus': 1.0},
      'actor': {'num_cpus': 0.5, 'resources': {'my_res': 2.0}},
  }
  for bad in ['learner', 'learner=cpu', 'learner=cpu:x', '=cpu:1']:
    with pytest.raises(ValueError, match='Bad resource'):
      launch.parse_resources(bad)
  assert launch.parse_resources('actor=cpus:1 learner=cpu:1,cpus:2-4') == {
      'actor': {'cpus': [1]}, 'learner': {'num_cpus': 1.0, 'cpus': [2, 3, 4]}}
  for bad in ['actor=cpus:x', 'actor=cpus:3-1', 'actor=cpus:-1', 'actor=cpus:']:
    with pytest.raises(ValueError, match='expected cpus:<core> or '
                       'cpus:<first>-<last>'):
      launch.parse_resources(bad)


@pytest.mark.parametrize('cpus', [[10**6], [], [-1], '0', [0.5]])
def test_pinning_to_cores_this_machine_lacks_is_refused(cpus):
  program = launch.Program('p')
  program.add_node(launch.PyNode(print), label='actor')
  with pytest.raises(ValueError, match=r"local_resources\['actor'\]\['cpus'\] "
                     'must be a list of CPU core ids from'):
    launch.launch(program, launch_type='local_mp',
                  local_resources={'actor': {'cpus': cpus}})


def test_unpicklable_arguments_are_fine_in_threads():
  import threading  # pylint: disable=g-import-not-at-top
  lock = threading.Lock()
  program = launch.Program('p')
  program.add_node(launch.PyNode(lambda l: l.acquire(), lock))
  launch.launch(program, launch_type='local_mt')
  assert lock.locked()


def test_a_stop_while_nodes_are_still_being_started(monkeypatch, tmp_path):
  """The first node fails at once; the stop it causes runs while the second
  node's thread is created but not yet started, and waits for it."""
  import threading  # pylint: disable=g-import-not-at-top
  thread_errors = []
  monkeypatch.setattr(threading, 'excepthook', thread_errors.append)

  class SlowStart(threading.Thread):

    def start(self):
      if self.name == 'node late/0':
        time.sleep(0.5)  # The failure of 'bad/0' stops the program meanwhile.
      super().start()

  monkeypatch.setattr(threading, 'Thread', SlowStart)
  program = launch.Program('starting')
  program.add_node(launch.PyNode(boom), label='bad')
  program.add_node(launch.PyNode(loop_until_stopped, tmp_path / 'final'),
                   label='late')
  with pytest.raises(ValueError, match='boom'):
    launch.launch(program, launch_type='test_mt').wait(timeout=60)
  assert not thread_errors, [e.exc_value for e in thread_errors]
  assert (tmp_path / 'final').read_text() == 'final checkpoint'


class SlowWriter:
  """A CourierNode whose `write` takes a while (as a file written at stop)."""

  def __init__(self, started_path):
    self._started_path = started_path

  def write(self, path):
    open(self._started_path, 'w').close()
    time.sleep(0.5)
    with open(path, 'w') as f:
      f.write('written')


def call_then_wait(writer, started_path, path):
  writer.futures.write(path)  # Not waited for: as actors report.
  while not started_path.exists():
    time.sleep(0.001)
  launch.stop()
  launch.wait_for_stop()


def test_stop_waits_for_futures_calls_already_running(tmp_path):
  """In threads, a `futures` call that began before the stop has ended when
  `stop` returns (its file is whole); calls not begun are cancelled."""
  program = launch.Program('writing')
  writer = program.add_node(launch.CourierNode(SlowWriter,
                                               tmp_path / 'started'))
  program.add_node(launch.PyNode(call_then_wait, writer,
                                 tmp_path / 'started', tmp_path / 'out'))
  launched = launch.launch(program, launch_type='test_mt')
  assert launched.wait(timeout=30)
  assert (tmp_path / 'out').read_text() == 'written'
