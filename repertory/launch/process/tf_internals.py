"""Every use of a private name of TensorFlow 2.15, in one place.

Written for `tensorflow==2.15.*` (`PINNED`); `PRIVATE_NAMES` lists each private
name used here, and tests/launch/private_apis_test.py fails when the
installed TensorFlow is another version or one of the names is gone.

- `session_runner`: `Session.run` rebuilds its fetch and feed bookkeeping on
  every call (two thirds of a small policy's call time on one core); the
  runner calls the session's own `_call_tf_sessionrun` with the graph's
  `TF_Output`s built once (`Tensor._as_tf_output`). `make_callable` would
  fall back to `Session.run`: it prebuilds only for calls without feeds.
"""

from typing import Any, Callable, Dict, List, Sequence

PINNED = ('tensorflow', '2.15')
# (module, attribute path) of every private name used here.
PRIVATE_NAMES = (
    ('tensorflow.python.client.session', 'BaseSession._call_tf_sessionrun'),
    ('tensorflow.python.framework.tensor', 'Tensor._as_tf_output'),
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
