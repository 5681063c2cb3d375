"""Rerunning a run directory with real short runs of `python -m repertory.run`
(local_mt): a truncated latest checkpoint is survived without losing
training, a finished run is refused unless its budget is raised, and results
are kept per attempt."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import tensorflow as tf

_FLAGS = ['--lp_launch_type=local_mt', '--num_actors=1', '--envs_per_actor=8',
          '--stop_at_return=never', '--eval_episodes=1',
          '--config.checkpoint.every_steps=5', '--config.checkpoint.to_keep=3']


def _run(logdir, budget):
  return subprocess.run(
      [sys.executable, '-m', 'repertory.run', f'--logdir={logdir}', *_FLAGS,
       f'--max_actor_steps={budget}'], capture_output=True, text=True,
      timeout=300, env={**os.environ, 'CUDA_VISIBLE_DEVICES': ''})


def _ok(result):
  assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
  return result


def _refused(result):
  assert result.returncode != 0
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and 'Traceback' not in result.stderr, result.stderr
  return lines[0]


def _json(*path):
  with open(os.path.join(*path)) as f:
    return json.load(f)


def _checkpoint(logdir):
  """(version, step, path) of the newest checkpoint named in the state file."""
  path = tf.train.latest_checkpoint(os.path.join(logdir, 'checkpoints',
                                                 'latest'))
  reader = tf.train.load_checkpoint(path)
  return (int(reader.get_tensor('version/.ATTRIBUTES/VARIABLE_VALUE')),
          int(reader.get_tensor('step/.ATTRIBUTES/VARIABLE_VALUE')), path)


def _truncate(prefix):
  (data,) = tf.io.gfile.glob(prefix + '.data-*')
  with open(data, 'r+b') as f:
    f.truncate(100)


def _tree(directory):
  return sorted((os.path.relpath(os.path.join(root, name), directory),
                 os.path.getsize(os.path.join(root, name)))
                for root, _, names in os.walk(directory) for name in names)


def test_truncated_latest_checkpoint_is_survived(tmp_path):
  logdir = str(tmp_path / 'run')
  _ok(_run(logdir, 2000))
  version, step, latest = _checkpoint(logdir)
  counts = _json(logdir, 'counts.json')
  older = sorted(int(p[:-len('.index')].rsplit('-', 1)[1]) for p in
                 os.listdir(os.path.join(logdir, 'checkpoints', 'latest'))
                 if p.endswith('.index'))[-2]
  _truncate(latest)

  # The scenario: the rerun resumes from the checkpoint before the
  # truncated one (not from scratch), and versions keep going up.
  # (A budget that leaves the learner a few steps: budgets are exact.)
  result = _ok(_run(logdir, counts['actor_steps'] + 2000))
  log = result.stdout + result.stderr
  # Named in one line and set aside before any node starts (rundir).
  assert re.search(rf'learner checkpoint {re.escape(latest)} is unreadable',
                   log)
  assert f'Resumed at version {older}, step {older}' in log
  assert f'serving its weights as version {version + 1}' in log
  assert os.path.exists(os.path.join(logdir, 'checkpoints', 'unreadable',
                                     os.path.basename(latest) + '.index'))
  new_version, new_step, _ = _checkpoint(logdir)
  assert new_version > version and new_step > older
  new_counts = _json(logdir, 'counts.json')
  assert all(new_counts[k] >= counts[k] for k in counts), (counts, new_counts)
  assert new_counts['actor_steps'] > counts['actor_steps']

  # Every checkpoint unreadable: one line naming the newest, nothing changed.
  for name in os.listdir(os.path.join(logdir, 'checkpoints', 'latest')):
    if name.endswith('.index'):
      _truncate(os.path.join(logdir, 'checkpoints', 'latest',
                             name[:-len('.index')]))
  before = _tree(logdir)
  line = _refused(_run(logdir, new_counts['actor_steps'] * 2))
  newest = tf.train.latest_checkpoint(os.path.join(logdir, 'checkpoints',
                                                   'latest'))
  assert f'is readable (the latest, {newest}: ' in line, line
  assert _tree(logdir) == before


def test_finished_run_is_refused_and_results_are_kept_per_attempt(tmp_path):
  logdir = str(tmp_path / 'run')
  _ok(_run(logdir, 2000))
  first = _json(logdir, 'results.json')
  steps = _json(logdir, 'counts.json')['actor_steps']
  assert _json(logdir, 'attempts', '1', 'results.json') == first

  # The same command again: refused before anything starts.
  before = _tree(logdir)
  line = _refused(_run(logdir, 2000))
  assert f'The run in {logdir} finished' in line
  assert f'after {steps} actor steps' in line
  assert '--max_actor_steps=' in line
  assert _tree(logdir) == before

  # A continuation that is stopped (SIGTERM) before it finishes: the earlier
  # results stay where they were.
  proc = subprocess.Popen(
      [sys.executable, '-m', 'repertory.run', f'--logdir={logdir}', *_FLAGS,
       f'--max_actor_steps={steps * 1000}', '--progress_every_seconds=1'],
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
      env={**os.environ, 'CUDA_VISIBLE_DEVICES': ''})
  try:
    deadline = time.monotonic() + 240
    progress = os.path.join(logdir, 'progress.log')
    lines_before = len(open(progress).readlines())
    while len(open(progress).readlines()) <= lines_before:
      assert proc.poll() is None and time.monotonic() < deadline
      time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=180)
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 143  # 128 + SIGTERM: stopped, not failed.
  assert _json(logdir, 'results.json') == first
  assert _json(logdir, 'attempts', '1', 'results.json') == first
  assert not os.path.exists(os.path.join(logdir, 'attempts', '2',
                                         'results.json'))
  assert _json(logdir, 'attempts', '2', 'attempt.json')['status'] == (
      'ended without results')

  # Continued with a larger budget: a third attempt with its own results.
  more = _json(logdir, 'counts.json')['actor_steps'] + 1
  _ok(_run(logdir, more))
  third = _json(logdir, 'results.json')
  assert third['actor_steps'] >= more
  assert _json(logdir, 'attempts', '3', 'results.json') == third
  assert _json(logdir, 'attempts', '1', 'results.json') == first
  assert _json(logdir, 'attempts', '3', 'config.json')['experiment'][
      'max_actor_steps'] == more
