"""SIGTERM a `python -m repertory.run`, rerun the same command: the learner's
steps and version continue from its final checkpoint, counts and CSV logs
continue, and the Reverb queue comes back as its checkpoint held it."""

import csv
import os
import re
import signal
from typing import List
import subprocess
import sys

import psutil
import pytest
import reverb
import tensorflow as tf

from repertory import experiment as experiment_lib
from repertory import testing
from repertory.agents import impala
from repertory.agents.actor_critic import tables as program_lib
from repertory.components import replay as replay_lib


def node_pids(nodes_logdir: str, unit: str = '') -> List[int]:
  """Processes whose stdout is `<nodes_logdir>/<unit>.log` (any unit if '')."""
  pids = []
  for process in psutil.process_iter():
    try:
      target = os.readlink(f'/proc/{process.pid}/fd/1')
    except OSError:
      continue
    if os.path.dirname(target) != nodes_logdir:
      continue
    if not unit or os.path.basename(target) == f'{unit}.log':
      pids.append(process.pid)
  return pids


def wait_for(predicate, what: str, timeout: float, period: float = 0.5):
  return testing.wait_until(predicate, what, timeout=timeout,
                            interval=period)


def _latest(logdir):
  """(version, step) of the latest learner checkpoint, or None."""
  path = tf.train.latest_checkpoint(os.path.join(logdir, 'checkpoints',
                                                 'latest'))
  if path is None:
    return None
  reader = tf.train.load_checkpoint(path)
  return (int(reader.get_tensor('version/.ATTRIBUTES/VARIABLE_VALUE')),
          int(reader.get_tensor('step/.ATTRIBUTES/VARIABLE_VALUE')))


def _logged_steps(logdir):
  path = os.path.join(logdir, 'learner', 'csv', 'learner.csv')
  if not os.path.exists(path):
    return []
  with open(path, newline='') as f:
    return [int(float(row['learner/steps'])) for row in csv.DictReader(f)
            if row.get('learner/steps')]


def _queue_in_progress_log(logdir):
  """The queue size on the monitor's latest progress line (0 if none)."""
  path = os.path.join(logdir, 'progress.log')
  if not os.path.exists(path):
    return 0
  with open(path) as f:
    sizes = re.findall(r'queue=(\d+)', f.read())
  return int(sizes[-1]) if sizes else 0


def _run_until_stopped(command, logdir, until, what, attempts=3):
  """Runs `command` until `until()`, then SIGTERMs it; returns its output.

  Ray's own start-up times out after a fixed 30 s on an overloaded machine;
  that (and only that) is retried.
  """
  proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, 'CUDA_VISIBLE_DEVICES': ''})
  try:
    wait_for(lambda: until() or proc.poll() is not None, what, 420,
             period=1.0)
    if proc.poll() is not None:
      output = proc.stdout.read()
      if 'timed out during startup' in output and attempts > 1:
        return _run_until_stopped(command, logdir, until, what, attempts - 1)
      raise AssertionError(output[-3000:])
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=180)
  finally:
    if proc.poll() is None:
      proc.kill()
  # Processes Ray is still tearing down may take a few seconds to exit.
  wait_for(lambda: not node_pids(os.path.join(logdir, 'nodes')), 'every node process to exit', 30)
  return output


@pytest.mark.slow
def test_sigterm_then_rerun_resumes(tmp_path):
  logdir = str(tmp_path / 'run')
  command = [
      sys.executable, '-m', 'repertory.run', f'--logdir={logdir}',
      # Actors outpace the learner: the queue holds unrolls when stopped.
      '--lp_launch_type=local_mp', '--num_actors=1', '--envs_per_actor=32',
      '--max_actor_steps=1000000000', '--stop_at_return=never',
      '--eval_episodes=1', '--config.unroll_length=10',
      '--config.batch_size=4', '--config.max_queue_size=16',
      '--config.checkpoint_every_steps=10', '--config.learner_log_every=5',
      '--config.replay_checkpoint_minutes=30',
      '--lp_termination_notice_secs=60']
  _run_until_stopped(command, logdir,
                     lambda: ((_latest(logdir) or (0, 0))[1] >= 10 and
                              _queue_in_progress_log(logdir) >= 8),
                     'a checkpoint at step 10 and a filled queue')
  version, step = _latest(logdir)
  assert step >= 10 and version >= 1
  # The final checkpoint (stop handler) is at least as new as the logs.
  assert max(_logged_steps(logdir)) <= step
  assert os.path.exists(os.path.join(logdir, 'snapshot', 'saved_model.pb'))

  # The queue's final checkpoint, restored as the Reverb node restores it.
  config = impala.Config(unroll_length=10, batch_size=4, max_queue_size=16)
  server = reverb.Server(
      program_lib.make_tables(config, experiment_lib.environment_spec('catch')),
      checkpointer=replay_lib.make_checkpointer(
          os.path.join(logdir, 'replay')))
  try:
    held = reverb.Client(f'localhost:{server.port}').server_info()[
        program_lib.TABLE].current_size
  finally:
    server.stop()
  assert held > 0

  first_rows = len(_logged_steps(logdir))
  output = _run_until_stopped(
      command, logdir,
      lambda: len(_logged_steps(logdir)) >= first_rows + 2,
      'the resumed learner to log')
  assert 'resuming' in output
  with open(os.path.join(logdir, 'nodes', 'learner_0.log')) as f:
    assert f'Resumed at version {version}, step {step}' in f.read()
  logged = _logged_steps(logdir)
  assert logged == sorted(logged), 'steps went back: logs overwritten?'
  assert logged[first_rows] > step
  assert _latest(logdir)[0] > version and _latest(logdir)[1] > step
