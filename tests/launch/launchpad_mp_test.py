"""Launchpad's multi-process launch tests, restated for repertory (test_mp
and local_mp), with the launcher's failures, death and SIGTERM.

Restates google-deepmind/launchpad launch/test_multi_processing/launch_test.py
with `import repertory.launch as lp`; the subprocess tests run programs as a
user would, from a `__main__` script.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

from absl.testing import absltest
import psutil

import repertory.launch as lp


def _noop():
  pass


def _fail():
  raise RuntimeError('Some error.')


def _block():
  while not lp.wait_for_stop(2):
    pass


def _stop(stopper):
  stopper()


class TestMultiProcessingTest(absltest.TestCase):

  def test_wait_for_some_groups_then_a_failure_anywhere(self):
    program = lp.Program('test')
    with program.group('main'):
      program.add_node(lp.PyNode(_noop))
    with program.group('daemon'):
      program.add_node(lp.PyNode(_block))
    with program.group('late'):
      program.add_node(lp.PyNode(_fail_after_main))
    waiter = lp.launch(program, launch_type='test_mp', test_case=self,
                       local_resources={'main': lp.PythonProcess(
                           env={'LP_TEST': '1'})})
    self.assertTrue(waiter.wait(['main']))
    # The failure of another group's node is raised as that node's own
    # exception, naming it.
    with self.assertRaisesRegex(RuntimeError, 'Some error') as info:
      waiter.wait(['daemon'])
    self.assertIsInstance(info.exception, lp.NodeError)
    self.assertEqual(info.exception.node_id, 'late/0')

  def test_program_stopper(self):
    program = lp.Program('test')
    with program.group('block'):
      program.add_node(lp.PyNode(_block))
    with program.group('stop'):
      program.add_node(lp.PyNode(_stop, lp.make_program_stopper(
          lp.LaunchType.TEST_MULTI_PROCESSING)))
    waiter = lp.launch(program, launch_type='test_mp', test_case=self)
    self.assertTrue(waiter.wait(timeout=180))


def _fail_after_main():
  time.sleep(1.0)
  _fail()


FAILING_START = textwrap.dedent('''
    import repertory.launch as lp

    class Table:
      def __init__(self):
        raise RuntimeError('bad table config')  # LINE-OF-THE-RAISE

      def size(self):
        return 0

    def use(table):
      table.size()

    def main():
      program = lp.Program('failing_start')
      table = program.add_node(lp.CourierNode(Table), label='table')
      program.add_node(lp.PyNode(use, table), label='user')
      try:
        lp.launch(program, launch_type='local_mp', termination_notice_secs=2)
      except RuntimeError as e:
        print('CAUGHT', type(e).__name__, e.node_id, repr(str(e)))
        print('NOTES', e.__notes__)

    if __name__ == '__main__':
      main()
''')


LONG_RUNNING = textwrap.dedent('''
    import os
    import sys

    import repertory.launch as lp

    def worker(index, outdir):
      open(os.path.join(outdir, f'started_{index}'), 'w').close()
      while not lp.stop_event().wait(0.05):
        pass

    def main(outdir, launch_type):
      program = lp.Program('long_running')
      for i in range(2):
        program.add_node(lp.PyNode(worker, i, outdir), label='worker')
      lp.launch(program, launch_type=launch_type,
                logdir=os.path.join(outdir, 'logs'))

    if __name__ == '__main__':
      main(sys.argv[1], sys.argv[2])
''')


def _alive(proc: psutil.Process) -> bool:
  try:
    return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
  except psutil.NoSuchProcess:
    return False


def _start(tmp_path, launch_type):
  script = os.path.join(tmp_path, 'program.py')
  with open(script, 'w') as f:
    f.write(LONG_RUNNING)
  launcher = subprocess.Popen(
      [sys.executable, script, tmp_path, launch_type],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  deadline = time.monotonic() + 180
  while len([n for n in os.listdir(tmp_path) if n.startswith('started_')]) < 2:
    if launcher.poll() is not None:
      raise AssertionError(launcher.stdout.read())
    if time.monotonic() > deadline:
      launcher.kill()
      raise AssertionError('the program did not start')
    time.sleep(0.2)
  return launcher


class LauncherTest(absltest.TestCase):

  def _tempdir(self) -> str:
    path = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, path, ignore_errors=True)
    return path

  def test_a_node_that_fails_to_start_is_named_with_its_own_exception(self):
    tmp = self._tempdir()
    script = os.path.join(tmp, 'program.py')
    with open(script, 'w') as f:
      f.write(FAILING_START)
    result = subprocess.run([sys.executable, script], capture_output=True,
                            text=True, timeout=240)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertIn("CAUGHT RuntimeError table/0 'bad table config'",
                  result.stdout)
    self.assertNotIn('None', result.stdout.split('NOTES')[0])
    # The traceback from the node's process shows __main__'s file and line.
    line = FAILING_START.splitlines().index(
        "    raise RuntimeError('bad table config')  # LINE-OF-THE-RAISE") + 1
    self.assertIn(f'program.py", line {line}, in __init__', result.stdout)

  def test_kill_9_of_the_launcher_leaves_no_process_of_the_run(self):
    tmp = self._tempdir()
    launcher = _start(tmp, 'local_mp')
    try:
      started = [p for p in psutil.Process(launcher.pid).children(
          recursive=True) if _alive(p)]
      names = [' '.join(p.cmdline())[:80] for p in started]
      # Ray's GCS, raylet and agents, the reaper and one process per node.
      self.assertGreaterEqual(len(started), 5, names)
      self.assertTrue(any('agent' in n.lower() for n in names), names)
      launcher.send_signal(signal.SIGKILL)
      launcher.wait(30)
      deadline = time.monotonic() + 10
      while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
      left = [(p.pid, ' '.join(p.cmdline())[:100]) for p in started
              if _alive(p)]
      self.assertEqual(left, [], 'processes left behind 10 s after kill -9')
    finally:
      if launcher.poll() is None:
        launcher.kill()

  def test_sigterm_to_the_launcher_exits_143(self):
    tmp = self._tempdir()
    launcher = _start(tmp, 'local_mt')
    try:
      launcher.send_signal(signal.SIGTERM)
      output, _ = launcher.communicate(timeout=60)
    finally:
      if launcher.poll() is None:
        launcher.kill()
    self.assertEqual(launcher.returncode, 143, output)


if __name__ == '__main__':
  absltest.main()
