"""Graph optimisation of `tf.function` calls, per thread.

TensorFlow runs Grappler, its graph optimiser, once per function graph,
when the graph is first called: a learner's first update pays for it. With
a small network the optimised graph runs each later call a little faster
and the optimisation costs a large part of the first call, so a learner can
start on the unoptimised graph and switch once the optimised one is ready:

    with graph_options.unoptimized():
      metrics = update(batch)        # instantiated without Grappler

or, with the switch made for it (`OptimizedLater`):

    update = graph_options.OptimizedLater(update, lambda: (empty_batch,),
                                          unoptimized_calls=10)

TensorFlow keys a function's instantiations by their call options, so the
graph called inside the block and outside are two instantiations that
coexist; the options are thread-local (`tf.function` calls in other threads
are not affected). The two give the same updates up to float rounding.
"""

import contextlib
import ctypes
import threading
from typing import Any, Callable, Iterator, Optional, Sequence

from absl import logging

try:  # Private but stable through TensorFlow 2.15 (the pinned version).
  from tensorflow.core.protobuf import config_pb2  # pylint: disable=g-import-not-at-top
  from tensorflow.python.eager import context as tf_context  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover
  config_pb2 = tf_context = None


@contextlib.contextmanager
def unoptimized() -> Iterator[None]:
  """In this thread, `tf.function` graphs first called inside the block are
  instantiated without Grappler (`disable_meta_optimizer`). Where
  TensorFlow's call options are not reachable it changes nothing."""
  ctx = before = None
  try:
    ctx = tf_context.context()
    before = ctx.function_call_options
    proto = config_pb2.ConfigProto()
    proto.ParseFromString(before.config_proto_serialized)
    proto.graph_options.rewrite_options.disable_meta_optimizer = True
    ctx.function_call_options = tf_context.FunctionCallOptions(
        executor_type=before.executor_type, config_proto=proto)
  except Exception:  # pylint: disable=broad-except
    logging.log_first_n(logging.WARNING, 'graph_options.unoptimized: '
                        "TensorFlow's function call options are not "
                        'reachable; graphs stay optimised.', 1)
    ctx = None
  try:
    yield
  finally:
    if ctx is not None:
      ctx.function_call_options = before


class OptimizedLater:
  """A `tf.function` called unoptimised at first and optimised after.

  The first calls run inside `unoptimized()`. After the first, a thread
  calls `function(*no_op_args())`, arguments with which a call changes
  nothing (an empty batch), so that TensorFlow instantiates and optimises
  the graph in that thread.

  Args:
    function: a `tf.function` whose argument types do not change (one
      graph: the no-op call must reuse the traced graph).
    no_op_args: returns the arguments of the no-op call.
    unoptimized_calls: how many calls run unoptimised; the next one waits
      for the thread if it is not done. The switch then comes at the same
      call in every run, so a seeded run's updates do not depend on timing.
      0: the optimised graph from the first call. None: every call until
      the thread is done (a switch that depends on timing).
  """

  def __init__(self, function: Callable[..., Any],
               no_op_args: Callable[[], Sequence[Any]],
               unoptimized_calls: Optional[int]):
    if unoptimized_calls is not None and unoptimized_calls < 0:
      raise ValueError(f'unoptimized_calls must be >= 0, got '
                       f'{unoptimized_calls}.')
    self._function = function
    self._no_op_args = no_op_args
    self._unoptimized_calls = unoptimized_calls
    self._calls = 0
    self._thread: Optional[threading.Thread] = None
    self._error: Optional[BaseException] = None

  @property
  def function(self) -> Callable[..., Any]:
    """The `tf.function` called."""
    return self._function

  @property
  def optimized(self) -> bool:
    """Whether the next call runs the optimised graph."""
    if self._unoptimized_calls is None:
      return self._calls > 0 and not (self._thread and
                                      self._thread.is_alive())
    return self._calls >= self._unoptimized_calls

  def __call__(self, *args: Any) -> Any:
    if self.optimized:
      if self._thread is not None:
        self._thread.join()
        self._thread = None
        if self._error is not None:
          raise self._error
      self._calls += 1
      return self._function(*args)
    self._calls += 1
    with unoptimized():
      result = self._function(*args)
    if self._calls == 1:
      self._thread = threading.Thread(target=self._instantiate,
                                      name='graph-optimizer')
      self._thread.start()
    return result

  def _instantiate(self) -> None:
    try:
      self._function(*self._no_op_args())
    except BaseException as e:  # pylint: disable=broad-except
      self._error = e
    # Grappler's working memory, freed, stays with the allocator (much of
    # it in this thread's own arena) unless handed back.
    release_free_memory()


def release_free_memory() -> None:
  """Returns the C allocator's free memory to the system (glibc's
  `malloc_trim`; elsewhere nothing)."""
  try:
    ctypes.CDLL(None).malloc_trim(0)
  except (AttributeError, OSError):
    pass
