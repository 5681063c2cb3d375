"""Nodes that crash are restarted up to their group's `max_restarts`:
rebuilt in their thread (local_mt), or their process restarted by Ray
(local_mp) after `kill -9`."""

import os
import signal
import time

import pytest

from repertory import launch

_attempts = []


class Flaky:
  """Raises in its first `failures` runs, then stops the program."""

  def __init__(self, failures: int):
    _attempts.append(time.monotonic())
    self._failures = failures

  def run(self):
    if len(_attempts) <= self._failures:
      raise RuntimeError(f'crash number {len(_attempts)}')
    launch.stop()


def _program(failures: int):
  program = launch.Program('flaky')
  with program.group('actor'):
    program.add_node(launch.PyClassNode(Flaky, failures))
  return program


def test_threads_restart_a_failing_node_up_to_max_restarts():
  _attempts.clear()
  launch.launch(_program(failures=2), launch_type='local_mt',
                max_restarts={'actor': 2})
  assert len(_attempts) == 3  # Built three times; the third run stopped it.


def test_threads_fail_once_the_restarts_are_spent():
  _attempts.clear()
  with pytest.raises(launch.NodeError, match='restarted 1 times'):
    launch.launch(_program(failures=5), launch_type='local_mt',
                  max_restarts={'actor': 1})
  assert len(_attempts) == 2


def test_max_restarts_must_name_a_group_and_a_count():
  with pytest.raises(ValueError, match="group 'learner'.*groups are"):
    launch.launch(_program(0), launch_type='test_mt',
                  max_restarts={'learner': 1})
  with pytest.raises(ValueError, match='int >= 0'):
    launch.launch(_program(0), launch_type='test_mt',
                  max_restarts={'actor': -1})


class Worker:
  """A courier node reporting its process id."""

  def pid(self) -> int:
    return os.getpid()


@pytest.mark.slow
def test_ray_restarts_a_killed_process(tmp_path):
  program = launch.Program('killed')
  with program.group('actor'):
    worker = program.add_node(launch.CourierNode(Worker))
  launched = launch.launch(program, launch_type='local_mp', block=False,
                           logdir=str(tmp_path),
                           max_restarts={'actor': 1})
  try:
    client = worker.dereference()
    first = client.pid()
    os.kill(first, signal.SIGKILL)
    # Calls wait for the restarted process (max_task_retries) instead of
    # failing; the node is built again there.
    second = client.pid()
    assert second != first
    assert launched.is_running() and launched.error is None
  finally:
    launched.stop(timeout=120)
