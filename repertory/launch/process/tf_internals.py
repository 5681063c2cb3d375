"""Every use of a private name of TensorFlow 2.15, in one place.

Written for `tensorflow==2.15.*` (`PINNED`); `PRIVATE_NAMES` lists each private
name used here, and tests/launch/private_apis_test.py fails when the
installed TensorFlow is another version or one of the names is gone.

- `session_runner`: `Session.run` rebuilds its fetch and feed bookkeeping on
  every call (two thirds of a small policy's call time on one core); the
  runner calls the session's own `_call_tf_sessionrun` with the graph's
  `TF_Output`s built once (`Tensor._as_tf_output`). `make_callable` would
  fall back to `Session.run`: it prebuilds only for calls without feeds.
- `variables_with_paths`: a module's variables with their attribute paths,
  from `tf.Module._flatten` (`tf.Module.variables` gives no paths).
- `CancellableNext`: `next()` of a tf.data iterator that `cancel()` ends
  while it waits (a get-next blocked in Reverb's sampler waits forever
  otherwise, even after its server stopped): the iterator's own
  `IteratorGetNext` op run under a `CancellationManager`.
"""

from typing import Any, Callable, Dict, Iterator, List, Sequence

# The CPU wheel (tensorflow-cpu) or the CUDA one (tensorflow).
PINNED = ('tensorflow-cpu|tensorflow', '2.15')
# (module, attribute path) of every private name used here.
PRIVATE_NAMES = (
    ('tensorflow.python.client.session', 'BaseSession._call_tf_sessionrun'),
    ('tensorflow.python.framework.ops', 'SymbolicTensor._as_tf_output'),
    ('tensorflow.python.module.module', 'Module._flatten'),
    ('tensorflow.python.eager.cancellation', 'CancellationManager'),
    ('tensorflow.python.eager.execute', 'execute_with_cancellation'),
    ('tensorflow.python.data.util.structure', 'from_compatible_tensor_list'),
    # Whose get-next `CancellableNext` runs itself (with the iterator's
    # `_iterator_resource`, `_flat_output_types`, `_flat_output_shapes` and
    # `_element_spec`, set on each instance).
    ('tensorflow.python.data.ops.iterator_ops',
     'OwnedIterator._next_internal'),
)


def session_runner(session: Any, feeds: Sequence[Any], fetches: Sequence[Any]
                   ) -> Callable[[Dict[Any, Any]], List[Any]]:
  """`run(values)`: the arrays of `fetches` for the arrays `values` fed to
  `feeds` (graph tensors of `session`'s graph), in their order."""
  # pylint: disable=protected-access
  feed_list = [t._as_tf_output() for t in feeds]
  fetch_list = [t._as_tf_output() for t in fetches]
  call = session._call_tf_sessionrun
  # pylint: enable=protected-access

  def run(values: Sequence[Any]) -> List[Any]:
    return call(None, dict(zip(feed_list, values)), fetch_list, [], None)
  return run


def variables_with_paths(module: Any) -> List[Any]:
  """[(attribute path tuple, tf.Variable)] of `module` (a `tf.Module`), in
  the module's order; a variable reachable by two paths is listed twice."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return list(module._flatten(  # pylint: disable=protected-access
      predicate=lambda v: isinstance(v, tf.Variable), with_path=True))


class CancellableNext:
  """`next(iterator)`; for a tf.data iterator, `cancel()` ends a get-next
  under way (it raises `CancelledError`); later calls raise `StopIteration`."""

  def __init__(self, iterator: Iterator[Any]):
    self._iterator = iterator
    self._manager = None
    if hasattr(iterator, '_iterator_resource'):  # A tf.data OwnedIterator.
      from tensorflow.python.eager import cancellation  # pylint: disable=g-import-not-at-top
      self._manager = cancellation.CancellationManager()

  def __call__(self) -> Any:
    iterator = self._iterator
    if iterator is None:
      raise StopIteration
    if self._manager is None:
      return next(iterator)
    # pylint: disable=g-import-not-at-top,protected-access
    import tensorflow as tf
    from tensorflow.python.data.util import structure
    from tensorflow.python.eager import context
    from tensorflow.python.eager import execute
    attrs = ('output_types', [execute.make_type(t, 'output_types')
                              for t in iterator._flat_output_types],
             'output_shapes', [execute.make_shape(s, 'output_shapes')
                               for s in iterator._flat_output_shapes])
    try:
      flat = execute.execute_with_cancellation(
          b'IteratorGetNext', len(iterator._flat_output_types),
          [iterator._iterator_resource], attrs, context.context(),
          self._manager)
    except tf.errors.OutOfRangeError:
      raise StopIteration from None
    return structure.from_compatible_tensor_list(iterator._element_spec, flat)
    # pylint: enable=g-import-not-at-top,protected-access

  def cancel(self) -> None:
    if self._manager is not None:
      self._manager.start_cancel()
    self._iterator = None
