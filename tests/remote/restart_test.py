"""A restart of the service: `python -m repertory.run --env=remote:catch` on
a fixed port is stopped (SIGTERM) and started again (resuming its run
directory) while a client process plays; the client reconnects to the new
service and continues with new episodes."""

import os
import signal
import subprocess
import sys
import time

import portpicker

TOKEN = 'restart-test-token'


def _run(logdir, port):
  """The run, its stderr in a file beside the run directory (a pipe nobody
  reads while it runs fills up and blocks the run's logging)."""
  env = dict(os.environ, REPERTORY_REMOTE_TOKEN=TOKEN)
  stderr = open(f'{logdir}-{time.monotonic_ns()}.stderr', 'w+')
  process = subprocess.Popen(
      [sys.executable, '-m', 'repertory.run', '--agent=seed',
       '--env=remote:catch', '--lp_launch_type=local_mt',
       '--num_actors=1', '--envs_per_actor=2',  # the client's 2 episodes
       f'--remote_port={port}', f'--logdir={logdir}',
       '--max_actor_steps=100000000', '--stop_at_return=never',
       '--eval_episodes=1', '--config.unroll_length=5',
       '--config.batch_size=4'],
      stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env)
  process.stderr_file = stderr
  return process


def _wait_for(path, process, timeout=240):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if os.path.exists(path):
      return
    if process.poll() is not None:
      process.stderr_file.seek(0)
      raise AssertionError('the run ended early:\n' +
                           process.stderr_file.read())
    time.sleep(0.2)
  raise TimeoutError(f'{path} did not appear within {timeout} s')


def _wait_for_episodes(path, process, timeout=240):
  """Waits until the run's episodes.csv lists a finished episode."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if os.path.exists(path):
      with open(path) as f:
        if len(f.read().splitlines()) > 1:  # The header, then episodes.
          return
    assert process.poll() is None, 'the run ended early'
    time.sleep(0.2)
  raise TimeoutError(f'no finished episode in {path} within {timeout} s')


def _stop(process):
  process.send_signal(signal.SIGTERM)
  try:
    process.wait(timeout=120)
  except subprocess.TimeoutExpired:
    process.kill()
    process.wait()


def test_clients_reconnect_after_the_service_restarts(tmp_path, clients):
  port = portpicker.pick_unused_port()
  logdir = str(tmp_path / 'run')
  address_file = os.path.join(logdir, 'remote', 'address')
  first = _run(logdir, port)
  client = None
  try:
    _wait_for(address_file, first)
    client = clients.python_client(address_file, TOKEN, '--threads=2',
                                   '--seconds=400', '--until_connects=2',
                                   '--episodes_after=20')
    # Play on the first service: some of its episodes finish.
    _wait_for_episodes(os.path.join(logdir, 'episodes.csv'), first)
    assert client.poll() is None
    _stop(first)
    os.remove(address_file)
    second = _run(logdir, port)
    try:
      _wait_for(address_file, second)
      result = clients.summary(client, timeout=300)
    finally:
      _stop(second)
  finally:
    if first.poll() is None:
      _stop(first)
    if client is not None and client.poll() is None:
      client.kill()
  assert result['connects'] == 2
  assert len(set(result['server_ids'])) == 2  # Two service instances.
  assert result['episodes_since_last_connect'] >= 20
  assert result['episodes'] > result['episodes_since_last_connect']
