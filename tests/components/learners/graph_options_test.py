"""`graph_options`: unoptimised calls per thread, and the switch to the
optimised graph at a fixed call."""

import threading

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.eager import context as tf_context

from repertory.components.learners import graph_options


def _meta_optimizer_disabled() -> bool:
  """Whether this thread's `tf.function` calls skip Grappler."""
  proto = config_pb2.ConfigProto()
  proto.ParseFromString(
      tf_context.context().function_call_options.config_proto_serialized)
  return proto.graph_options.rewrite_options.disable_meta_optimizer


def test_unoptimized_is_this_threads_and_restored():
  seen_elsewhere = []
  assert not _meta_optimizer_disabled()
  with graph_options.unoptimized():
    assert _meta_optimizer_disabled()
    other = threading.Thread(
        target=lambda: seen_elsewhere.append(_meta_optimizer_disabled()))
    other.start()
    other.join()
  assert not _meta_optimizer_disabled()
  assert seen_elsewhere == [False]


class _Recorded:
  """`x -> counter += x` as a `tf.function`, recording each call's thread
  and whether Grappler was off for it."""

  def __init__(self):
    self.counter = tf.Variable(0.0)
    self.calls = []
    self._add = tf.function(lambda x: self.counter.assign_add(x),
                            input_signature=[tf.TensorSpec([], tf.float32)])

  def __call__(self, x):
    self.calls.append((threading.current_thread().name,
                       _meta_optimizer_disabled(), float(x)))
    return self._add(x)


def test_first_calls_unoptimized_then_the_prepared_graph():
  function = _Recorded()
  later = graph_options.OptimizedLater(function, lambda: (np.float32(0),),
                                       unoptimized_calls=3)
  for _ in range(5):
    later(np.float32(1))
  assert function.counter.numpy() == 5.0  # The no-op call added nothing.
  main = threading.current_thread().name
  by_thread = [(t == main, off, x) for t, off, x in function.calls]
  assert sorted(by_thread) == sorted(
      [(True, True, 1.0)] * 3 + [(False, False, 0.0)] +
      [(True, False, 1.0)] * 2)
  assert [off for t, off, _ in function.calls if t == main] == [
      True, True, True, False, False]


def test_zero_unoptimized_calls_is_the_plain_function():
  function = _Recorded()
  later = graph_options.OptimizedLater(function, lambda: (np.float32(0),),
                                       unoptimized_calls=0)
  later(np.float32(2))
  assert function.calls == [(threading.current_thread().name, False, 2.0)]


def test_a_failed_no_op_call_is_raised_at_the_switch():
  function = _Recorded()
  later = graph_options.OptimizedLater(
      function, lambda: (np.float32(0), 'one argument too many'),
      unoptimized_calls=1)
  later(np.float32(1))
  with pytest.raises(TypeError):
    later(np.float32(1))


def test_negative_unoptimized_calls_refused():
  with pytest.raises(ValueError, match='unoptimized_calls must be >= 0'):
    graph_options.OptimizedLater(lambda: None, tuple, unoptimized_calls=-1)


def test_none_switches_once_the_optimized_graph_is_ready():
  function = _Recorded()
  later = graph_options.OptimizedLater(function, lambda: (np.float32(0),),
                                       unoptimized_calls=None)
  later(np.float32(1))
  later._thread.join()  # pylint: disable=protected-access
  assert later.optimized
  later(np.float32(1))
  later(np.float32(1))
  main = threading.current_thread().name
  assert [off for t, off, _ in function.calls if t == main] == [
      True, False, False]
  assert function.counter.numpy() == 3.0
