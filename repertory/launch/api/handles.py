"""Handles: references to nodes that become clients inside a node's process.

A handle is what `Program.add_node` returns. Pass it to other nodes'
constructors; inside their processes it arrives dereferenced:

* the handle of a `CourierNode` becomes a client whose public methods are
  called remotely: `client.method(...)` blocks, `client.futures.method(...)`
  returns a `concurrent.futures.Future`;
* the handle of a `ReverbNode` becomes a `reverb.Client` (in a node process
  that has not imported Reverb, a `reverb_lite.WriterClient`: its writers
  need no TensorFlow).
"""

import concurrent.futures
import copy
import dataclasses
import threading
import time
from typing import Any, Callable, Optional

from absl import logging

from repertory.launch.api import context
from repertory.launch.api import errors

# How long a client waits for its server to come up before raising, and how
# often it says what it waits for.
DEFAULT_CONNECT_TIMEOUT_SECS = 600.0
LOG_EVERY_SECS = 10.0

_HINT = ('A handle is a reference to a node, not its client: dereference the '
         'handle inside a node (pass it as an argument of the node that uses '
         'it, where it arrives dereferenced), or call handle.dereference() '
         "after launch(program, launch_type='test_mt').")


class Handle:
  """A reference to a node of a program; see the module docstring."""

  def __init__(self, kind: str, description: str):
    self._kind = kind                 # 'courier', 'reverb' or 'py'
    self._description = description   # e.g. "CourierNode(Learner)"
    self._program_id: Optional[str] = None
    self._node_id: Optional[str] = None
    self._unit_id: Optional[str] = None
    self._label: Optional[str] = None

  @property
  def node_id(self) -> Optional[str]:
    return self._node_id

  @property
  def label(self) -> Optional[str]:
    return self._label

  def dereference(self) -> Any:
    """Returns the node's client (inside a node, or after a test_mt launch)."""
    if self._program_id is None:
      raise errors.LaunchError(
          f'The handle of {self._description} belongs to no program: add the '
          'node with program.add_node(node) before using its handle.')
    runtime = context.runtime_for(self._program_id)
    if runtime is None:
      raise errors.LaunchError(
          f"Cannot dereference the handle of node '{self._node_id}' "
          f'({self._description}): its program is not running in this '
          'process. ' + _HINT)
    return runtime.client(self)

  def __getattr__(self, name: str):
    if name.startswith('_'):
      raise AttributeError(name)
    raise errors.NotDereferencedError(
        f"'{type(self).__name__}' of node '{self._node_id}' "
        f'({self._description}) has no attribute {name!r}. ' + _HINT)

  def __repr__(self) -> str:
    return f'<Handle {self._node_id} {self._description}>'


class CourierHandle(Handle):
  """The handle of a `CourierNode` (dereferenced: a `CourierClient`)."""

  def set_client_kwargs(self, **kwargs) -> None:
    """Launchpad's options of the client; accepted and not used (see
    `CourierNode`)."""
    self._client_kwargs = dict(kwargs)


class Deferred:
  """An object built inside the node's process (for unpicklable objects).

  `Deferred(make_environment, 'CartPole')` in a node's arguments arrives in
  the node as `make_environment('CartPole')`; its arguments may hold handles.
  """

  def __init__(self, ctor: Callable[..., Any], *args, **kwargs):
    if not callable(ctor):
      raise TypeError(f'Deferred needs a callable, got {ctor!r}.')
    self.ctor = ctor
    self.args = args
    self.kwargs = kwargs

  def __repr__(self) -> str:
    return f'Deferred({getattr(self.ctor, "__name__", self.ctor)!r})'


def resolve(nest: Any, dereference: Callable[[Handle], Any]) -> Any:
  """Replaces handles and `Deferred`s found in lists, tuples, dicts and
  dataclasses of `nest` (recursively) with clients and built objects."""
  if isinstance(nest, Handle):
    return dereference(nest)
  if isinstance(nest, Deferred):
    args = resolve(nest.args, dereference)
    kwargs = resolve(nest.kwargs, dereference)
    return nest.ctor(*args, **kwargs)
  if isinstance(nest, list):
    return [resolve(x, dereference) for x in nest]
  if isinstance(nest, tuple):
    values = [resolve(x, dereference) for x in nest]
    if hasattr(nest, '_fields'):  # namedtuple
      return type(nest)(*values)
    return type(nest)(values) if type(nest) is not tuple else tuple(values)
  if isinstance(nest, dict):
    return type(nest)((k, resolve(v, dereference)) for k, v in nest.items())
  if dataclasses.is_dataclass(nest) and not isinstance(nest, type):
    changed = {}
    for field in dataclasses.fields(nest):
      value = getattr(nest, field.name, None)
      new = resolve(value, dereference)
      if new is not value:
        changed[field.name] = new
    if not changed:
      return nest
    nest = copy.copy(nest)
    for name, value in changed.items():
      object.__setattr__(nest, name, value)
    return nest
  return nest


def wait_with_log(poll: Callable[[float], bool], what: str,
                  timeout: Optional[float]) -> None:
  """Calls `poll(step)` (which waits up to `step` s) until it returns True.

  Logs what it waits for every `LOG_EVERY_SECS` and raises TimeoutError after
  `timeout` seconds (None: wait forever).
  """
  start = time.monotonic()
  while True:
    waited = time.monotonic() - start
    step = LOG_EVERY_SECS
    if timeout is not None:
      if waited >= timeout:
        raise TimeoutError(f'Timed out after {waited:.0f} s waiting for {what}.')
      step = min(step, timeout - waited)
    if poll(step):
      return
    waited = time.monotonic() - start
    if timeout is None or waited < timeout:
      logging.warning('Still waiting for %s (%.0f s so far, timeout %s).', what,
                      waited, 'none' if timeout is None else f'{timeout:.0f} s')


class _Futures:
  """`client.futures.method(...)` returns a `concurrent.futures.Future`."""

  def __init__(self, client: 'CourierClient'):
    self._client = client

  def __getattr__(self, name: str) -> Callable[..., concurrent.futures.Future]:
    if name.startswith('_'):
      raise AttributeError(name)
    client = self._client

    def submit(*args, **kwargs) -> concurrent.futures.Future:
      return client._submit(name, args, kwargs)  # pylint: disable=protected-access
    return submit

  def __call__(self, *args, **kwargs) -> concurrent.futures.Future:
    """`client.futures(...)`: calls the node's object itself."""
    return self._client._submit('__call__', args, kwargs)  # pylint: disable=protected-access


class CourierClient:
  """Calls the public methods of a `CourierNode` (in-process or remote).

  Subclasses implement `_connect()` (wait for the server, may be called many
  times), `_call(method, args, kwargs)` and `_submit(method, args, kwargs)`.
  """

  def __init__(self, handle: Handle, connect_timeout: Optional[float]):
    self._handle = handle
    self._connect_timeout = connect_timeout
    self._connected = False
    self._connect_lock = threading.Lock()
    self.futures = _Futures(self)

  def _what(self, method: str) -> str:
    h = self._handle
    return (f"node '{h._node_id}' ({h._description}) to come up to call "  # pylint: disable=protected-access
            f'{method}()')

  def _ensure_connected(self, method: str) -> None:
    if self._connected:
      return
    with self._connect_lock:
      if not self._connected:
        self._connect(method)
        self._connected = True

  def _connect(self, method: str) -> None:
    raise NotImplementedError

  def _call(self, method: str, args, kwargs) -> Any:
    raise NotImplementedError

  def _submit(self, method: str, args, kwargs) -> concurrent.futures.Future:
    raise NotImplementedError

  def __getattr__(self, name: str) -> Callable[..., Any]:
    if name.startswith('_'):
      raise AttributeError(name)

    def call(*args, **kwargs):
      return self._call(name, args, kwargs)
    call.__name__ = name
    return call

  def __call__(self, *args, **kwargs) -> Any:
    """`client(...)`: calls the node's object itself (its `__call__`)."""
    return self._call('__call__', args, kwargs)

  def __repr__(self) -> str:
    return f'<CourierClient of {self._handle._node_id}>'  # pylint: disable=protected-access
