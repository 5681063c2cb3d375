"""Ctrl-C to a local_mp launcher ends every process it started."""

import signal
import subprocess
import sys
import textwrap
import time

import psutil

from repertory import testing

PROGRAM = textwrap.dedent('''
    import os
    import sys
    import time

    from repertory import launch

    def worker(index, outdir):
      open(os.path.join(outdir, f'started_{index}'), 'w').close()
      while not launch.stop_event().wait(0.05):
        pass
      with open(os.path.join(outdir, f'final_{index}'), 'w') as f:
        f.write('final checkpoint')

    class Server:
      def ping(self):
        return 'pong'

    def main(outdir, launch_type):
      program = launch.Program('interrupted')
      program.add_node(launch.CourierNode(Server), label='server')
      for i in range(2):
        program.add_node(launch.PyNode(worker, i, outdir), label='worker')
      try:
        launch.launch(program, launch_type=launch_type,
                      logdir=os.path.join(outdir, 'logs'),
                      termination_notice_secs=10)
      except KeyboardInterrupt:
        print('launcher: interrupted, every node stopped', flush=True)
        sys.exit(3)

    if __name__ == '__main__':
      main(sys.argv[1], sys.argv[2])
''')


def _signal_state(pid: int) -> str:
  with open(f'/proc/{pid}/status') as f:
    return ' '.join(line.strip() for line in f
                    if line.startswith(('SigBlk', 'SigIgn', 'SigCgt')))


def _alive(proc: psutil.Process) -> bool:
  try:
    return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
  except psutil.NoSuchProcess:
    return False


def test_sigint_to_the_launcher_leaves_no_process_behind(tmp_path):
  script = tmp_path / 'program.py'
  script.write_text(PROGRAM)
  me = psutil.Process()
  before = {p.pid for p in me.children(recursive=True) if _alive(p)}
  launcher = subprocess.Popen([sys.executable, str(script), str(tmp_path),
                               'local_mp'],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, preexec_fn=testing.like_a_shell)
  try:
    deadline = time.monotonic() + 180
    while not all((tmp_path / f'started_{i}').exists() for i in range(2)):
      assert launcher.poll() is None, launcher.stdout.read()
      assert time.monotonic() < deadline, 'the program did not start'
      time.sleep(0.2)
    started = [p for p in psutil.Process(launcher.pid).children(recursive=True)
               if _alive(p)]
    # Ray's own processes plus one actor process per node.
    assert len(started) >= 4, [p.cmdline() for p in started]
    signals = _signal_state(launcher.pid)
    launcher.send_signal(signal.SIGINT)
    try:
      output, _ = launcher.communicate(timeout=120)
    except subprocess.TimeoutExpired:
      launcher.kill()
      raise AssertionError(f'the launcher did not stop within 120 s of '
                           f'SIGINT; its signal state then: {signals}; '
                           f'output: {launcher.communicate()[0]}') from None
  finally:
    if launcher.poll() is None:
      launcher.kill()
  assert launcher.returncode == 3, (signals, output)
  assert 'every node stopped' in output
  # The nodes got their notice before being killed.
  for i in range(2):
    assert (tmp_path / f'final_{i}').read_text() == 'final checkpoint'
  deadline = time.monotonic() + 30
  while any(_alive(p) for p in started) and time.monotonic() < deadline:
    time.sleep(0.2)
  left = [(p.pid, ' '.join(p.cmdline())[:100]) for p in started if _alive(p)]
  assert not left, f'processes left behind: {left}'
  after = {p.pid for p in me.children(recursive=True) if _alive(p)}
  assert after == before


def test_sigterm_to_a_threads_launcher_gives_nodes_their_notice(tmp_path):
  script = tmp_path / 'program.py'
  script.write_text(PROGRAM)
  launcher = subprocess.Popen([sys.executable, str(script), str(tmp_path),
                               'local_mt'],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
  try:
    deadline = time.monotonic() + 60
    while not all((tmp_path / f'started_{i}').exists() for i in range(2)):
      assert launcher.poll() is None, launcher.stdout.read()
      assert time.monotonic() < deadline, 'the program did not start'
      time.sleep(0.05)
    launcher.send_signal(signal.SIGTERM)
    output, _ = launcher.communicate(timeout=60)
  finally:
    if launcher.poll() is None:
      launcher.kill()
  assert launcher.returncode == 3, output
  for i in range(2):
    assert (tmp_path / f'final_{i}').read_text() == 'final checkpoint'
