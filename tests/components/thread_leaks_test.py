"""Threads that components start inside a launched program end with it
(counted in a fresh process: other tests' threads come and go in a shared
one)."""

import gc
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import reverb
import tensorflow as tf

from repertory import launch
from repertory.components import replay as replay_lib
from repertory.components import variables

_MARGIN = 3  # Threads TensorFlow or gRPC may start once per process.


def _counts():
  gc.collect()
  return (len(threading.enumerate()), len(os.listdir('/proc/self/task')))


def _settled(before, timeout_s=10.0):
  """The thread counts once they are back within the margin (or at the
  timeout)."""
  deadline = time.monotonic() + timeout_s
  while True:
    now = _counts()
    if (now[0] <= before[0] + _MARGIN and now[1] <= before[1] + _MARGIN or
        time.monotonic() > deadline):
      return now
    time.sleep(0.1)


def _tables():
  return [reverb.Table(
      'replay', reverb.selectors.Prioritized(0.6), reverb.selectors.Fifo(),
      max_size=100, rate_limiter=reverb.rate_limiters.MinSize(1),
      signature=tf.TensorSpec([2], tf.float32))]


class Source:

  def get_variables(self, names):
    return 1, [np.ones(2, np.float32) for _ in names]


class Learner:
  """Samples a starved table; updates priorities; fetches weights."""

  def __init__(self, replay, source):
    self._iterator = replay_lib.StarvationLoggingIterator(
        iter(replay_lib.make_dataset(replay, 'replay', batch_size=2)),
        replay, 'replay')
    self._priorities = replay_lib.PriorityUpdater(replay, 'replay')
    self._client = variables.VariableClient(source, 'policy')
    self.score = launch.batched_handler(4, timeout=0.01)(self._score)

  def _score(self, x):
    return x * 2

  def step(self):
    self._client.update()
    self._priorities.update([1], [1.0])
    return int(self.score(np.int64(3)))

  def run(self):
    launch.run_until_stop(lambda: next(self._iterator))


def _program():
  program = launch.Program('leaks')
  replay = program.add_node(launch.ReverbNode(_tables), label='replay')
  source = program.add_node(launch.CourierNode(Source), label='source')
  learner = program.add_node(launch.CourierNode(Learner, replay, source),
                             label='learner')
  return program, learner


def _check_threads_end_with_their_program():
  for _ in range(2):  # The first launch starts TensorFlow's own pools.
    before = _counts()
    program, learner_handle = _program()
    launched = launch.launch(program, launch_type='test_mt',
                             termination_notice_secs=5)
    learner = learner_handle.dereference()
    assert learner.step() == 6
    time.sleep(0.5)  # The learner's run() waits for a sample meanwhile.
    names = {t.name for t in threading.enumerate()}
    assert 'dataset_next_replay' in names
    assert 'priority_updater_replay' in names
    launched.stop()
    del learner, launched, program, learner_handle
  after = _settled(before)
  left = sorted(t.name for t in threading.enumerate())
  assert after[0] <= before[0] + _MARGIN, (before, after, left)
  assert after[1] <= before[1] + _MARGIN, (before, after, left)
  assert not {'dataset_next_replay', 'priority_updater_replay',
              'variable_client_fetch'} & set(left), left


def test_component_threads_end_with_their_program():
  root = pathlib.Path(__file__).resolve().parents[2]
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      filter(None, [str(root), os.environ.get('PYTHONPATH')])))
  done = subprocess.run([sys.executable, __file__], env=env, cwd=root,
                        capture_output=True, text=True, timeout=240,
                        check=False)
  assert done.returncode == 0, done.stderr[-3000:]


if __name__ == '__main__':
  _check_threads_end_with_their_program()
