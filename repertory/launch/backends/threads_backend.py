"""`test_mt` / `local_mt`: every node in a thread of the calling process."""

import concurrent.futures
import threading
import time
from typing import Any, Callable, Dict, Optional
import weakref

from absl import logging

from repertory.launch.api import context
from repertory.launch.api import errors
from repertory.launch.api import handles as handles_lib
from repertory.launch.backends import hosting
from repertory.launch.api import program as program_lib


class _CallPool:
  """The threads that run handles' `futures` calls. At stop, calls not
  started are cancelled and the ones running are waited for (a call that
  writes a file at stop, e.g. the league's, finishes before `stop` returns)."""

  def __init__(self, name: str):
    self._pool = concurrent.futures.ThreadPoolExecutor(
        max_workers=256, thread_name_prefix=f'{name}-futures')
    self._lock = threading.Lock()
    self._futures = weakref.WeakSet()

  def submit(self, fn: Callable[..., Any], *args: Any,
             **kwargs: Any) -> concurrent.futures.Future:
    future = self._pool.submit(fn, *args, **kwargs)
    with self._lock:
      self._futures.add(future)
    return future

  def shutdown(self, timeout: float) -> None:
    """Cancels what has not started; waits up to `timeout` s for the rest."""
    self._pool.shutdown(wait=False, cancel_futures=True)
    with self._lock:
      running = [f for f in self._futures if not f.done()]
    concurrent.futures.wait(running, timeout=max(timeout, 0.0))


class ThreadRuntime(context.Runtime):
  """Hosts a whole program in threads of this process."""

  def __init__(self, program: program_lib.Program, launch_type: str,
               termination_notice_secs: float,
               connect_timeout: Optional[float] = (
                   handles_lib.DEFAULT_CONNECT_TIMEOUT_SECS),
               max_restarts: Optional[Dict[str, int]] = None):
    super().__init__(program.program_id, launch_type)
    self.program = program
    self._notice_secs = termination_notice_secs
    self._connect_timeout = connect_timeout
    self._executor = _CallPool(program.name)
    self.host = hosting.NodeHost(
        self, program.all_nodes(), host_ip='localhost',
        on_error=self._on_error, on_finished=self._on_finished,
        max_restarts=max_restarts)
    self.error: Optional[errors.NodeError] = None
    self.done = threading.Event()
    self._stop_lock = threading.Lock()
    self._stopping = False

  def start(self) -> None:
    context.register(self)
    self.host.start()
    if not self.host.records:
      self.request_stop('the program has no nodes')

  def wait_until_built(self, timeout: float) -> bool:
    return self.host.all_built(timeout)

  def client(self, handle: handles_lib.Handle):
    node_id = handle._node_id  # pylint: disable=protected-access
    record = self.host.record(node_id)
    if handle._kind == 'courier':  # pylint: disable=protected-access
      return hosting.LocalCourierClient(self.host, handle, self._executor,
                                        self._connect_timeout)
    if handle._kind == 'reverb':  # pylint: disable=protected-access
      import reverb  # pylint: disable=g-import-not-at-top
      handles_lib.wait_with_log(
          lambda t: self.host.wait_ready(node_id, t),
          f"Reverb node '{node_id}' to come up", self._connect_timeout)
      return reverb.Client(record.built.address)
    raise errors.LaunchError(
        f"The handle of node '{node_id}' ({record.node.description}) cannot "
        'be dereferenced: only CourierNode and ReverbNode handles can.')

  def _on_error(self, record: hosting.NodeRecord) -> None:
    with self._stop_lock:
      if self.error is None:
        self.error = failure_of(record)
        logging.error('Stopping program %r: %s', self.program.name,
                      errors.one_line(self.error))
    self.request_stop(f'node {record.node.node_id} failed')

  def _on_finished(self, record: hosting.NodeRecord) -> None:
    del record
    if self.host.all_done():
      self.request_stop('every node finished')

  def stop_requested(self) -> bool:
    return self._stopping or self.stop_event.is_set()

  def request_stop(self, reason: str) -> None:
    with self._stop_lock:
      if self._stopping:
        return
      self._stopping = True
    threading.Thread(target=self._stop, args=(reason,), daemon=True,
                     name=f'{self.program.name}-stopper').start()

  def _stop(self, reason: str) -> None:
    logging.info('Stopping program %r: %s.', self.program.name, reason)
    try:
      self.run_stop_handlers()
      deadline = time.monotonic() + self._notice_secs
      still = self.host.join(deadline)
      if still:
        logging.warning(
            'Nodes %s did not stop within the termination notice of %.1f s; '
            'killing them.', still, self._notice_secs)
        self.host.kill(still)
      self.host.cleanup()
      self.run_closers()  # The servers are stopped: blocked reads return.
      # Within what is left of the notice.
      self._executor.shutdown(timeout=deadline - time.monotonic())
    finally:
      context.unregister(self)
      self.done.set()

  def wait_done(self, timeout: Optional[float]) -> bool:
    return self.done.wait(timeout)

  def labels_done(self, labels, any_of: bool) -> bool:
    return self.host.labels_done(labels, any_of)

  def finalize(self) -> None:
    pass


def failure_of(record: hosting.NodeRecord) -> errors.NodeError:
  """The error `wait()` raises for a failed node: its own exception, or
  that of the node it depended on when that one failed to start."""
  if record.blame is not None:
    label, node_id, tb, exception = record.blame
    return errors.node_failure(label, node_id, tb, exception, phase='build')
  return errors.node_failure(record.node.label, record.node.node_id,
                             record.error, record.exception,
                             phase=record.phase)
