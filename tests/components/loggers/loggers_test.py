"""Terminal, CSV and TensorBoard loggers and make_logger."""

import csv
import glob
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

from repertory.components import loggers
from repertory.components.loggers import tensorboard as loggers_tensorboard


def test_make_logger_namespaces_and_fans_out(tmp_path):
  printed = []
  logger = loggers.make_logger('actor', logdir=str(tmp_path), time_delta=0.0,
                               steps_key='actor_steps',
                               print_fn=printed.append)
  logger.write({'episode_return': np.float32(1.5), 'actor_steps': 10})
  logger.write({'episode_return': 2.5, 'actor_steps': 20, 'extra': 3})
  logger.close()
  assert 'actor/episode_return = 1.5' in printed[0]
  with open(tmp_path / 'csv' / 'actor.csv') as f:
    rows = list(csv.DictReader(f))
  assert [r['actor/episode_return'] for r in rows] == ['1.5', '2.5']
  assert rows[1]['actor/extra'] == '3' and rows[0]['actor/extra'] == ''
  events = glob.glob(os.path.join(tmp_path, 'tensorboard', 'actor', '*'))
  assert events, 'no TensorBoard event file written'
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tags = {(v.tag, e.step) for path in events
          for e in tf.compat.v1.train.summary_iterator(path)
          for v in e.summary.value}
  assert ('actor/episode_return', 20) in tags


def test_rows_written_from_several_threads_all_reach_the_csv(tmp_path):
  # A node's run loop and the calls it serves write to one logger; a row
  # that widens the CSV (a new key) must not meet another thread's write.
  logger = loggers.make_logger('learner', logdir=str(tmp_path),
                               time_delta=3600.0, print_fn=lambda _: None)
  threads, rows = 4, 100
  start = threading.Barrier(threads)
  errors = []

  def write(thread):
    start.wait()
    try:
      for i in range(rows):
        logger.write({'step': i, f'key_{thread}_{i % 10}': thread})
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  workers = [threading.Thread(target=write, args=(t,))
             for t in range(threads)]
  for worker in workers:
    worker.start()
  for worker in workers:
    worker.join()
  logger.close()
  assert not errors, errors
  with open(tmp_path / 'csv' / 'learner.csv') as f:
    written = list(csv.DictReader(f))
  assert len(written) == threads * rows
  assert len(written[0]) == 1 + threads * 10


def test_terminal_time_filter():
  printed = []
  logger = loggers.make_logger('learner', time_delta=3600.0,
                               print_fn=printed.append)
  for i in range(5):
    logger.write({'loss': i})
  assert len(printed) == 1


def test_bad_label():
  with pytest.raises(ValueError, match='label'):
    loggers.make_logger('a/b')


def _events(directory):
  """{tag: [(step, summary value)]} of the TensorBoard files in `directory`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  events = {}
  for path in glob.glob(os.path.join(directory, '*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        events.setdefault(value.tag, []).append((event.step, value))
  return events


def test_a_distribution_is_a_histogram_in_tensorboard_and_a_mean_elsewhere(
    tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  printed = []
  logger = loggers.make_logger('learner', logdir=str(tmp_path), time_delta=0.0,
                               steps_key='learner_steps',
                               print_fn=printed.append)
  lag = np.array([0, 1, 1, 2, 2, 2, 6], np.int64)
  logger.write({'charts/policy_lag_histogram': lag, 'learner_steps': 5,
                'one': np.array([3.0]), 'none': np.zeros(0)})
  logger.close()
  assert 'learner/charts/policy_lag_histogram = 2 ' in printed[0] + ' '
  with open(tmp_path / 'csv' / 'learner.csv') as f:
    row = next(csv.DictReader(f))
  assert float(row['learner/charts/policy_lag_histogram']) == 2.0
  assert float(row['learner/one']) == 3.0 and row['learner/none'] == 'nan'
  events = _events(os.path.join(tmp_path, 'tensorboard', 'learner'))
  [(step, histogram)] = events['learner/charts/policy_lag_histogram']
  assert step == 5
  assert histogram.metadata.plugin_data.plugin_name == 'histograms'
  buckets = tf.make_ndarray(histogram.tensor)  # [k, 3]: left, right, count.
  assert buckets.shape[1] == 3 and buckets[:, 2].sum() == len(lag)
  assert buckets[:, 0].min() == 0 and buckets[:, 1].max() == 6
  [(_, one)] = events['learner/one']  # A batch of one is still a batch.
  assert one.metadata.plugin_data.plugin_name == 'histograms'
  # Scalars are simple values: what EventAccumulator.Scalars reads.
  [(_, learner_steps)] = events['learner/learner_steps']
  assert learner_steps.WhichOneof('value') == 'simple_value'
  accumulator = event_accumulator.EventAccumulator(
      os.path.join(tmp_path, 'tensorboard', 'learner'))
  accumulator.Reload()
  [scalar] = accumulator.Scalars('learner/learner_steps')
  assert (scalar.step, scalar.value) == (5, 5.0)
  assert 'learner/none' not in events  # Nothing to draw.


def test_tensorboard_events_are_written_without_importing_tensorflow(
    tmp_path):
  # tf.summary in eager mode leaks (TF 2.15 / Python 3.11); environment-only
  # actors must not import TensorFlow at all.
  code = (
      'import sys\n'
      'import numpy as np\n'
      'from repertory.components.loggers import tensorboard\n'
      f'logger = tensorboard.TensorBoardLogger({str(tmp_path)!r})\n'
      "logger.write({'x': 1.5, 'lags': np.array([0, 1, 1, 3])})\n"
      'logger.close()\n'
      "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'\n")
  subprocess.run([sys.executable, '-c', code], check=True)
  events = _events(str(tmp_path))
  [(_, scalar)] = events['x']
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  assert scalar.simple_value == 1.5
  [(_, histogram)] = events['lags']
  buckets = tf.make_ndarray(histogram.tensor)
  assert buckets.shape == (loggers_tensorboard.HISTOGRAM_BUCKETS, 3)
  assert buckets[:, 2].sum() == 4 and buckets[-1, 2] == 1  # 3 in the last.
