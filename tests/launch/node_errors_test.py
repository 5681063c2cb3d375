"""A node's error that would only repeat is not retried, and its real
exception reaches the launcher: a constructor's error, or the same error
twice in a row (local_mt in threads, local_mp in real processes)."""

import os
import pathlib

import pytest

from repertory import launch
from repertory.launch.api import errors


class BadConstructor:
  """Fails in its constructor, as an actor given an unknown environment."""

  def __init__(self, attempts: str):
    with open(attempts, 'a') as f:
      f.write(f'{os.getpid()}\n')
    raise ValueError("Unknown environment spec 'reacher'")

  def run(self):
    raise AssertionError('never reached')


class SameErrorInRun:
  """Builds, then raises the same error in every run()."""

  def __init__(self, attempts: str):
    with open(attempts, 'a') as f:
      f.write(f'{os.getpid()}\n')

  def run(self):
    raise KeyError('missing_key')


class ChangingErrorInRun:
  """Raises a different error in each of its first runs, then stops."""

  def __init__(self, attempts: str, failures: int):
    with open(attempts, 'a') as f:
      f.write(f'{os.getpid()}\n')
    self._attempt = len(pathlib.Path(attempts).read_text().splitlines())
    self._failures = failures

  def run(self):
    if self._attempt <= self._failures:
      raise RuntimeError(f'crash number {self._attempt}')
    launch.stop()


def _program(node_class, *args) -> launch.Program:
  program = launch.Program('errors')
  with program.group('actor'):
    program.add_node(launch.PyClassNode(node_class, *args))
  return program


def _attempts(path: pathlib.Path) -> list:
  return path.read_text().splitlines() if path.exists() else []


def test_threads_do_not_restart_a_constructor_error(tmp_path):
  attempts = tmp_path / 'attempts'
  with pytest.raises(ValueError, match="Unknown environment spec 'reacher'"
                     ) as info:
    launch.launch(_program(BadConstructor, str(attempts)),
                  launch_type='local_mt', max_restarts={'actor': 3})
  assert len(_attempts(attempts)) == 1
  error = info.value
  assert isinstance(error, launch.NodeError) and error.phase == 'build'
  assert errors.one_line(error) == (
      "node 'actor/0' failed in its constructor: ValueError: Unknown "
      "environment spec 'reacher'")
  assert 'failed in its constructor: not restarted' in error.node_traceback


def test_threads_do_not_restart_the_same_error_twice(tmp_path):
  attempts = tmp_path / 'attempts'
  with pytest.raises(KeyError) as info:
    launch.launch(_program(SameErrorInRun, str(attempts)),
                  launch_type='local_mt', max_restarts={'actor': 3})
  # Built, failed, rebuilt once, failed the same way: not a third time.
  assert len(_attempts(attempts)) == 2
  assert info.value.phase == 'run'
  assert errors.one_line(info.value) == (
      "node 'actor/0' failed: KeyError: 'missing_key'")
  assert 'the same error twice in a row' in info.value.node_traceback


def test_threads_still_restart_errors_that_change(tmp_path):
  attempts = tmp_path / 'attempts'
  launch.launch(_program(ChangingErrorInRun, str(attempts), 2),
                launch_type='local_mt', max_restarts={'actor': 3})
  assert len(_attempts(attempts)) == 3  # Two crashes, then it stopped.


def test_one_line_of_a_dead_process_names_its_log():
  error = errors.NodeError('actor', 'actor/1', 'The process of unit actor/1 '
                           'died or could not start:\nActorDiedError: ...',
                           logfile='/runs/x/nodes/actor_1.log')
  assert errors.one_line(error) == (
      "node 'actor/1' failed: The process of unit actor/1 died or could not "
      'start: ActorDiedError: ... (log: /runs/x/nodes/actor_1.log)')


def test_processes_do_not_restart_a_constructor_error(tmp_path):
  attempts = tmp_path / 'attempts'
  logdir = tmp_path / 'nodes'
  with pytest.raises(ValueError, match="Unknown environment spec 'reacher'"
                     ) as info:
    launch.launch(_program(BadConstructor, str(attempts)),
                  launch_type='local_mp', logdir=str(logdir),
                  max_restarts={'actor': 3})
  assert len(_attempts(attempts)) == 1  # One process, built once.
  error = info.value
  log = str(logdir / 'actor_0.log')
  assert errors.one_line(error) == (
      "node 'actor/0' failed in its constructor: ValueError: Unknown "
      f"environment spec 'reacher' (log: {log})")
  assert "ValueError: Unknown environment spec 'reacher'" in (
      pathlib.Path(log).read_text())


def test_processes_do_not_restart_the_same_error_twice(tmp_path):
  attempts = tmp_path / 'attempts'
  with pytest.raises(KeyError) as info:
    launch.launch(_program(SameErrorInRun, str(attempts)),
                  launch_type='local_mp', logdir=str(tmp_path / 'nodes'),
                  max_restarts={'actor': 3})
  pids = _attempts(attempts)
  # Restarted once, in a new process (one failure uses one restart), then
  # the same error again ends the program.
  assert len(pids) == 2 and pids[0] != pids[1]
  assert errors.one_line(info.value).startswith(
      "node 'actor/0' failed: KeyError: 'missing_key' (log: ")
