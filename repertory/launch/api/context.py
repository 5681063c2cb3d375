"""The running program as seen from inside a node: stop, stop events, mode.

Every process (and every node thread) of a launched program knows its
*runtime*: the object that hosts the nodes of this process and knows how to
reach the others. These functions find it, so node code can write::

  while not launch.stop_event().is_set():
    learner.step()
  launch.stop()
"""

import abc
import os
import threading
from typing import Any, Callable, Dict, List, Optional
import weakref

_local = threading.local()
_lock = threading.Lock()
_active: List['Runtime'] = []           # running programs of this process
_by_program: Dict[str, 'Runtime'] = {}  # program id -> runtime
# The channel key of code that runs outside any launched program.
_PROCESS_KEY = os.urandom(32)


class Runtime(abc.ABC):
  """A launched program as one process sees it."""

  host_ip = '127.0.0.1'  # The address other processes reach this one at.

  def __init__(self, program_id: str, launch_type: str):
    self.program_id = program_id
    self.launch_type = launch_type
    self.stop_event = threading.Event()
    # The program's secret for `launch.channel`: made here by the launcher,
    # handed to the nodes of other processes when Ray creates them.
    self.authkey = os.urandom(32)
    self._stop_handlers: List[Callable[[], None]] = []
    self._handlers_lock = threading.Lock()
    # What nodes' components built and close once the program has stopped
    # (`close_at_stop`): weak references, so that a component dropped
    # while the program runs is not kept alive by its registration.
    self._closers: List[Callable[[], Optional[Callable[[], None]]]] = []

  @abc.abstractmethod
  def request_stop(self, reason: str) -> None:
    """Asks the whole program to stop (returns at once)."""

  def stop_requested(self) -> bool:
    """Whether the program is stopping (or a stop was just asked for here,
    before the stop event is set)."""
    return self.stop_event.is_set()

  @abc.abstractmethod
  def client(self, handle: Any) -> Any:
    """Returns the client of the node that `handle` names."""

  def wait_until_built(self, timeout: float) -> bool:
    """Waits until every node of the program is built (or failed to
    build), at most `timeout` seconds; False if it gave up. Nodes call it
    before their `run()`, so that the program's run loops start together
    (as under Launchpad, where a program's processes start at once)."""
    del timeout
    return True

  def register_stop_handler(self, fn: Callable[[], None]) -> None:
    with self._handlers_lock:
      self._stop_handlers.append(fn)

  def unregister_stop_handler(self, fn: Callable[[], None]) -> None:
    with self._handlers_lock:
      if fn not in self._stop_handlers:
        raise ValueError(f'{fn!r} is not a registered stop handler.')
      self._stop_handlers.remove(fn)

  def run_stop_handlers(self) -> None:
    """Sets the stop event and calls the stop handlers once each."""
    from absl import logging  # pylint: disable=g-import-not-at-top
    self.stop_event.set()
    with self._handlers_lock:
      handlers, self._stop_handlers = self._stop_handlers, []
    for fn in handlers:
      try:
        fn()
      except Exception:  # pylint: disable=broad-except
        logging.exception('Stop handler %r raised.', fn)

  def register_closer(self, fn: Callable[[], None]) -> None:
    """Calls `fn()` from `run_closers()`; a bound method is held weakly."""
    ref = (weakref.WeakMethod(fn) if hasattr(fn, '__self__') and
           hasattr(fn, '__func__') else (lambda: fn))
    with self._handlers_lock:
      if len(self._closers) >= 64 and len(self._closers) & 63 == 0:
        self._closers = [r for r in self._closers if r() is not None]
      self._closers.append(ref)

  def run_closers(self) -> None:
    """Calls the registered closers once each, newest first (after the
    nodes stopped and their servers were stopped)."""
    from absl import logging  # pylint: disable=g-import-not-at-top
    with self._handlers_lock:
      closers, self._closers = self._closers, []
    for ref in reversed(closers):
      fn = ref()
      if fn is None:
        continue
      try:
        fn()
      except Exception:  # pylint: disable=broad-except
        logging.exception('Closing %r at the program\'s stop raised.', fn)


def register(runtime: Runtime) -> None:
  with _lock:
    _active.append(runtime)
    _by_program[runtime.program_id] = runtime


def unregister(runtime: Runtime) -> None:
  with _lock:
    if runtime in _active:
      _active.remove(runtime)
    if _by_program.get(runtime.program_id) is runtime:
      del _by_program[runtime.program_id]


def set_thread_runtime(runtime: Optional[Runtime]) -> None:
  _local.runtime = runtime


def thread_runtime() -> Optional[Runtime]:
  """The runtime of the node this thread runs (or calls into), if any."""
  return getattr(_local, 'runtime', None)


def close_at_stop(fn: Callable[[], None]) -> bool:
  """Calls `fn()` (a component's `close`) once the program whose node
  built the component has stopped: after its nodes' run loops ended and its
  servers (e.g. Reverb) were stopped, so that the threads the component
  started end with the program. A bound method is held weakly (a component
  dropped meanwhile is not kept alive).

  Returns False, registering nothing, on a thread that runs no node of a
  launched program (the caller then closes the component itself).
  """
  runtime = thread_runtime()
  if runtime is None:
    return False
  runtime.register_closer(fn)
  return True


def current_runtime(required: bool = True) -> Optional[Runtime]:
  runtime = getattr(_local, 'runtime', None)
  if runtime is None:
    with _lock:
      runtime = _active[-1] if _active else None
  if runtime is None and required:
    raise RuntimeError(
        'No launched program in this process: this function works inside a '
        'node of a program started with repertory.launch.launch() (or in the '
        "process that launched it with launch_type='test_mt').")
  return runtime


def runtime_for(program_id: str) -> Optional[Runtime]:
  with _lock:
    return _by_program.get(program_id)


def stop() -> None:
  """Stops the whole program (callable from any node, in any launch type).

  Returns at once; every node then gets the stop event and the termination
  notice period to finish.
  """
  current_runtime().request_stop('launch.stop() was called')


def stop_event() -> threading.Event:
  """An event set when the program is stopping; poll it in `run()` loops."""
  return current_runtime().stop_event


def stopping() -> bool:
  """True inside a launched program that is stopping; False outside one."""
  runtime = current_runtime(required=False)
  return runtime is not None and runtime.stop_event.is_set()


def run_until_stop(step: Callable[[], Any]) -> None:
  """Calls `step()` until the program stops: the `run()` loop of a node.

  An exception `step()` raises once the program is stopping (a Reverb server
  or another node went away mid-call) ends the loop quietly; one raised
  before that propagates, and the node fails.
  """
  event = stop_event()
  try:
    while not event.is_set():
      step()
  except Exception:  # pylint: disable=broad-except
    if not event.is_set():
      raise
    from absl import logging  # pylint: disable=g-import-not-at-top
    logging.info('%r raised while the program was stopping; ignored.', step)


def wait_for_stop(timeout_secs: Optional[float] = None, *,
                  timeout: Optional[float] = None) -> bool:
  """Blocks until the program is stopping; False if `timeout_secs` passed.

  `timeout` is the same (repertory's earlier name).
  """
  if timeout_secs is not None and timeout is not None:
    raise ValueError('wait_for_stop takes timeout_secs or timeout, not both.')
  if timeout_secs is None:
    timeout_secs = timeout
  return current_runtime().stop_event.wait(timeout_secs)


def register_stop_handler(fn: Callable[[], None]) -> None:
  """Calls `fn()` in this process when the program starts stopping."""
  current_runtime().register_stop_handler(fn)


def unregister_stop_handler(fn: Callable[[], None]) -> None:
  """Undoes `register_stop_handler(fn)`."""
  current_runtime().unregister_stop_handler(fn)


def host_ip() -> str:
  """The address other processes of the program reach this process at:
  loopback on one machine, the Ray node's address on a cluster (what a node
  that opens its own server socket binds to)."""
  runtime = current_runtime(required=False)
  return runtime.host_ip if runtime is not None else '127.0.0.1'


def channel_key() -> bytes:
  """The secret that the channels of this program share (`launch.channel`):
  the launched program's, or this process's outside one."""
  runtime = current_runtime(required=False)
  return runtime.authkey if runtime is not None else _PROCESS_KEY


def gpu_visible() -> bool:
  """Whether this process may use a GPU: `CUDA_VISIBLE_DEVICES` names one
  (Ray sets it in every node process to the GPUs granted to its group by
  `--lp_resources`, empty where none were), or, where it is not set, the
  machine has an NVIDIA GPU (`/proc/driver/nvidia/gpus`). Imports nothing:
  a node decides with it whether it needs TensorFlow at all."""
  devices = os.environ.get('CUDA_VISIBLE_DEVICES')
  if devices is not None:
    return devices.strip() not in ('', '-1')
  try:
    return bool(os.listdir('/proc/driver/nvidia/gpus'))
  except OSError:
    return False


def get_launch_type() -> Optional[str]:
  """The launch type of the program this code runs in, or None outside one."""
  runtime = current_runtime(required=False)
  return runtime.launch_type if runtime is not None else None
