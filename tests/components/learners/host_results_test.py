"""Tests of `HostResults`: numpy out of a `tf.function`, no EagerTensor."""

import gc
import tracemalloc

import numpy as np
import tensorflow as tf

from repertory.components import learners


def test_send_delivers_numpy_copies_of_the_nest_and_take_clears_it():
  results = learners.HostResults()
  variable = tf.Variable([1.0, 2.0])

  @tf.function
  def step(x):
    variable.assign_add(x)
    results.send({'sum': tf.reduce_sum(variable), 'weights': [variable],
                  'flag': True})

  assert results.take() is None
  step(tf.constant([1.0, 1.0]))
  got = results.take()
  assert set(got) == {'sum', 'weights', 'flag'}
  assert isinstance(got['sum'], np.ndarray) and got['sum'] == 5.0
  np.testing.assert_array_equal(got['weights'][0], [2.0, 3.0])
  assert bool(got['flag'])
  assert results.take() is None
  step(tf.constant([1.0, 1.0]))
  np.testing.assert_array_equal(results.take()['weights'][0], [3.0, 4.0])


def test_a_step_that_sends_its_results_leaves_no_memory_behind():
  results = learners.HostResults()
  iterator = iter(tf.data.Dataset.range(10**9).map(
      lambda i: tf.fill([4], tf.cast(i, tf.float32))))
  variable = tf.Variable(tf.zeros([4]))

  @tf.function
  def step(iterator):
    variable.assign_add(next(iterator))
    results.send({'mean': tf.reduce_mean(variable), 'weights': variable})

  def grown_bytes_per_call(calls):
    gc.collect()
    before = tracemalloc.take_snapshot()
    for _ in range(calls):
      step(iterator)
      results.take()
    gc.collect()
    after = tracemalloc.take_snapshot()
    return sum(s.size_diff for s in after.compare_to(before, 'lineno')) / calls

  for _ in range(100):  # Tracing and first-call caches.
    step(iterator)
  tracemalloc.start()
  try:
    # TensorFlow's nest caches fill during the first few thousand calls.
    grown_bytes_per_call(4000)
    # A returned tensor or a `.numpy()` per call would be >= 48 B per call.
    assert grown_bytes_per_call(3000) < 8
  finally:
    tracemalloc.stop()
