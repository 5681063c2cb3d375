"""The collector paused while a process starts its nodes, then frozen."""

import gc
import json
import os
import sys
import threading
import time

import cloudpickle
import pytest

from repertory import launch
from repertory.launch.process import startup_gc

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(autouse=True)
def collector_restored():
  """Leaves this process's collector as it was: on, nothing frozen."""
  assert gc.isenabled() and not startup_gc.paused()
  yield
  startup_gc.resume()
  gc.unfreeze()
  gc.enable()


def _wait_for(condition, timeout=30.0):
  deadline = time.monotonic() + timeout
  while not condition():
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.01)


def _frozen(obj) -> bool:
  """Whether `obj` (a tracked container) is in the permanent generation
  (`gc.get_objects()` lists the other three)."""
  assert gc.is_tracked(obj)
  return not any(o is obj for o in gc.get_objects())


def test_pause_stops_the_collector_and_resume_freezes_what_exists():
  assert startup_gc.pause()
  assert not gc.isenabled() and startup_gc.paused()
  before = []
  assert gc.get_freeze_count() == 0 and not _frozen(before)
  startup_gc.resume()
  assert gc.isenabled() and not startup_gc.paused()
  assert gc.get_freeze_count() > 0 and _frozen(before)
  after = []
  startup_gc.resume()  # Again: nothing (what came since stays unfrozen).
  assert gc.isenabled() and not _frozen(after)


def test_a_second_pause_and_a_collector_turned_off_elsewhere_are_left_alone():
  assert startup_gc.pause()
  assert not startup_gc.pause()
  startup_gc.resume()
  gc.disable()  # Somebody's own choice: pause() must not undo it later.
  assert not startup_gc.pause()
  startup_gc.resume()
  assert not gc.isenabled() and gc.get_freeze_count() > 0
  gc.enable()


def test_the_collector_resumes_by_itself_after_max_seconds():
  assert startup_gc.pause(max_seconds=0.2)
  _wait_for(lambda: not startup_gc.paused())
  assert gc.isenabled() and gc.get_freeze_count() > 0


def test_max_seconds_must_be_positive():
  with pytest.raises(ValueError, match='max_seconds must be > 0, got 0'):
    startup_gc.pause(max_seconds=0)
  assert gc.isenabled() and not startup_gc.paused()


class _Built:
  """Remembers the collector's state while it was constructed (built)."""

  def __init__(self, release: threading.Event = None):
    if release is not None:
      assert release.wait(30)
    self.while_built = {'enabled': gc.isenabled(),
                        'paused': startup_gc.paused()}

  def state(self) -> dict:
    return {'while_built': self.while_built, 'enabled': gc.isenabled(),
            'paused': startup_gc.paused(),
            'frozen': gc.get_freeze_count()}


def test_the_nodes_of_a_process_resume_it_once_the_last_is_built():
  release = threading.Event()
  program = launch.Program('gc')
  fast = program.add_node(launch.CourierNode(_Built), label='fast')
  slow = program.add_node(launch.CourierNode(_Built, release), label='slow')
  assert startup_gc.pause()
  launched = launch.launch(program, launch_type='test_mt')
  try:
    assert fast.dereference().state()['while_built'] == {
        'enabled': False, 'paused': True}
    assert startup_gc.paused()  # One node is still being built.
    release.set()
    state = slow.dereference().state()
    assert state['while_built'] == {'enabled': False, 'paused': True}
    # Resumed before the last node was seen built.
    assert state['enabled'] and not state['paused'] and state['frozen'] > 0
  finally:
    release.set()
    launched.stop(timeout=30)


def test_without_a_pause_a_program_leaves_the_collector_alone():
  program = launch.Program('gc')
  node = program.add_node(launch.CourierNode(_Built), label='node')
  launched = launch.launch(program, launch_type='test_mt')
  try:
    state = node.dereference().state()
    assert state['while_built'] == {'enabled': True, 'paused': False}
    assert state['frozen'] == 0
  finally:
    launched.stop(timeout=30)


def _report(built, out_path: str) -> None:
  with open(out_path, 'w') as f:
    json.dump({'pid': os.getpid(), **built.state()}, f)


def test_a_local_mp_node_process_builds_paused_and_runs_frozen(tmp_path):
  program = launch.Program('gc')
  with program.group('worker'):  # _Built is made while the node is built.
    program.add_node(launch.PyNode(_report, launch.Deferred(_Built),
                                   str(tmp_path / 'node.json')))
  launch.launch(program, launch_type='local_mp',
                logdir=str(tmp_path / 'logs'), termination_notice_secs=5)
  node = json.loads((tmp_path / 'node.json').read_text())
  assert node['pid'] != os.getpid()
  assert node['while_built'] == {'enabled': False, 'paused': True}
  assert node['enabled'] and not node['paused'] and node['frozen'] > 0
