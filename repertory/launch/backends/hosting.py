"""Brings nodes up in threads of the current process and keeps their state.

Used by the threads backend (all nodes of a program) and by each Ray actor
(the nodes of one unit).
"""

import ctypes
import sys
import threading
import time
import traceback
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from absl import logging

from repertory.launch.process import blas_threads
from repertory.launch.api import context
from repertory.launch.api import errors
from repertory.launch.api import handles as handles_lib
from repertory.launch.api import nodes as nodes_lib
from repertory.launch.process import startup_gc

# The longest a node's run() waits for the program's other nodes to be built.
START_TOGETHER_SECS = 120.0


class NodeRecord:
  """The state of one node in this process."""

  def __init__(self, node: nodes_lib.Node):
    self.node = node
    self.built: Optional[nodes_lib.Built] = None
    self.ready = threading.Event()      # built (or failed to build)
    self.finished = threading.Event()   # run() returned (or raised)
    self.error: Optional[str] = None    # formatted traceback
    self.exception: Optional[BaseException] = None  # what the node raised
    # When the node failed because a node it depends on failed to start:
    # that node's (label, node_id, traceback, exception), reported instead.
    self.blame: Optional[tuple] = None
    self.thread: Optional[threading.Thread] = None
    self.restarts = 0                   # times rebuilt after a failure
    self.run_returned = False           # run() returned before any stop
    # Where the node is: 'build' (its constructor) or 'run' (built; its
    # run() or its methods). A constructor's error is not retried.
    self.phase = 'build'

  @property
  def serving(self) -> bool:
    return self.built is not None and self.built.serves and self.error is None


class NodeHost:
  """Builds and runs `nodes` in threads of this process."""

  def __init__(self, runtime: context.Runtime,
               nodes: Sequence[nodes_lib.Node], host_ip: str,
               on_error: Callable[[NodeRecord], None],
               on_finished: Callable[[NodeRecord], None],
               max_restarts: Optional[Mapping[str, int]] = None):
    """`max_restarts`: per group label, how many times a node that raises is
    built and run again in its thread (threads backend; Ray restarts whole
    processes itself)."""
    self._runtime = runtime
    self.runtime = runtime
    self._max_restarts = dict(max_restarts or {})
    self._host_ip = host_ip
    self._on_error = on_error
    self._on_finished = on_finished
    self.records: Dict[str, NodeRecord] = {
        n.node_id: NodeRecord(n) for n in nodes}
    self._starting = threading.Lock()
    self._ready_lock = threading.Lock()

  def start(self) -> None:
    # A node that fails at once stops the program from another thread while
    # later nodes are still being started; `join` waits until all are.
    with self._starting:
      for record in self.records.values():
        thread = threading.Thread(
            target=self._run_node, args=(record,), daemon=True,
            name=f'node {record.node.node_id}')
        thread.start()
        record.thread = thread

  def _run_node(self, record: NodeRecord) -> None:
    context.set_thread_runtime(self._runtime)
    blas_threads.limit_blas_threads()  # Once per process, before any node's.
    node = record.node
    ctx = nodes_lib.BuildContext(
        resolve=lambda nest: handles_lib.resolve(nest, self._runtime.client),
        host_ip=self._host_ip, stop_event=self._runtime.stop_event)
    limit = self._max_restarts.get(node.label, 0)
    previous = None  # failure_key of the last failure, if any

    def will_restart(error: BaseException) -> bool:
      """Whether a failure is retried: not once the program stops or the
      restarts are spent, nor an error of the constructor or the same error
      as the last failure (they would only repeat)."""
      return (isinstance(error, Exception) and
              not self._runtime.stop_event.is_set() and
              record.restarts < limit and record.phase == 'run' and
              errors.failure_key(error) != previous)
    try:
      while True:
        try:
          self._build_and_run(record, ctx, will_restart)
          break
        except Exception as e:  # pylint: disable=broad-except
          if not will_restart(e):
            raise
          previous = errors.failure_key(e)
          record.restarts += 1
          logging.error('Node %s (%s) failed; restarting it (%d of '
                        'max_restarts=%d):\n%s', node.node_id,
                        node.description, record.restarts, limit,
                        traceback.format_exc())
    except BaseException as e:  # pylint: disable=broad-except
      record.exception = e
      record.error = traceback.format_exc()
      record.error += _why_not_restarted(
          record, limit, errors.failure_key(e) == previous)
      record.blame = _blame(e)
      if self._runtime.stop_event.is_set():
        logging.warning('Node %s raised while the program was stopping:\n%s',
                        node.node_id, record.error)
      else:
        logging.error('Node %s (%s) failed:\n%s', node.node_id,
                      node.description, record.error)
        self._on_error(record)
    finally:
      self._set_ready(record)
      record.finished.set()
    if record.error is None:
      self._on_finished(record)

  def _build_and_run(self, record: NodeRecord, ctx: nodes_lib.BuildContext,
                     will_restart: Callable[[BaseException], bool]) -> None:
    record.phase = 'build'
    try:
      built = record.node.build(ctx)
    except BaseException as e:
      # Callers waiting for this node learn why it failed (a constructor's
      # error is never retried).
      record.exception = e
      record.error = traceback.format_exc()
      self._set_ready(record)
      raise
    record.phase = 'run'
    record.built = built
    self._set_ready(record)
    if built.run is not None:
      if record.restarts == 0:
        self._start_together(record)
      built.run()
      if built.serves and not self._runtime.stop_requested():
        # As Launchpad: a CourierNode whose run() returns ends its server.
        record.run_returned = True
        built.serves = False

  def _start_together(self, record: NodeRecord) -> None:
    """Waits (at most `START_TOGETHER_SECS`) until every node of the program
    is built, so that no run() starts calling nodes while others are still
    coming up (a batched handler's first batch would be partial)."""
    deadline = time.monotonic() + START_TOGETHER_SECS
    while not self._runtime.stop_event.is_set():
      left = deadline - time.monotonic()
      if left <= 0:
        logging.warning('Node %s: the program\'s nodes were not all built '
                        'within %.0f s; running it anyway.',
                        record.node.node_id, START_TOGETHER_SECS)
        return
      if self._runtime.wait_until_built(min(left, 10.0)):
        return

  def all_built(self, timeout: Optional[float]) -> bool:
    """Whether every node of this process is built (or failed to build)
    within `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for record in self.records.values():
      left = None if deadline is None else max(deadline - time.monotonic(), 0)
      if not record.ready.wait(left):
        return False
    return True

  def _set_ready(self, record: NodeRecord) -> None:
    with self._ready_lock:
      if all(r is record or r.ready.is_set() for r in self.records.values()):
        startup_gc.resume()  # The last node is built (before it is seen so).
      record.ready.set()

  def record(self, node_id: str) -> NodeRecord:
    try:
      return self.records[node_id]
    except KeyError:
      raise errors.LaunchError(
          f'Node {node_id!r} is not hosted in this process (it hosts '
          f'{sorted(self.records)}).') from None

  def wait_ready(self, node_id: str, timeout: Optional[float]) -> bool:
    """True once the node is built; raises if building it failed."""
    record = self.record(node_id)
    if not record.ready.wait(timeout):
      return False
    if record.built is None:
      node = record.node
      if record.blame is not None:  # It failed because another node did.
        label, blamed_id, tb, exception = record.blame
        raise errors.NodeStartError(blamed_id, label, blamed_id, tb, exception)
      raise errors.NodeStartError(node_id, node.label, node.description,
                                  record.error, record.exception)
    return True

  def _done(self) -> Dict[str, bool]:
    """node id -> finished (run() returned, not serving); a node of a
    colocation with return_on_first_completed is done once one of its
    colocation's nodes is."""
    done = {n: r.finished.is_set() and not r.serving
            for n, r in self.records.items()}
    first = {id(r.node.colocation) for n, r in self.records.items()
             if done[n] and r.node.colocation is not None and
             r.node.colocation.return_on_first_completed}
    return {n: d or id(self.records[n].node.colocation) in first
            for n, d in done.items()}

  def all_done(self) -> bool:
    """True when every node's run() returned and none of them serves."""
    return all(self._done().values())

  def labels_done(self, labels: Sequence[str], any_of: bool) -> bool:
    """Whether every (or, with `any_of`, one) node of `labels` hosted here
    finished."""
    done = [d for n, d in self._done().items()
            if self.records[n].node.label in labels]
    return (any(done) if any_of else all(done)) if done else False

  def first_error(self) -> Optional[NodeRecord]:
    for record in self.records.values():
      if record.error is not None:
        return record
    return None

  def join(self, deadline: float) -> List[str]:
    """Waits until `deadline` (monotonic) for run loops; returns the ids of
    the nodes still running."""
    with self._starting:  # Every node's thread has been started.
      pass
    for record in self.records.values():
      if record.thread is not None:
        record.thread.join(max(0.0, deadline - time.monotonic()))
    return [node_id for node_id, r in self.records.items()
            if r.thread is not None and r.thread.is_alive()]

  def kill(self, node_ids: Sequence[str], wait: float = 2.0) -> List[str]:
    """Raises `NodeKilled` in the threads of `node_ids` (which ignored the
    stop); returns those still alive after `wait` s.

    A thread is interrupted between two Python bytecodes: a node looping in
    Python ends; one blocked inside a C call (a long `time.sleep`, a socket
    read) ends only when that call returns.
    """
    for node_id in node_ids:
      thread = self.records[node_id].thread
      if thread is not None and thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(NodeKilled))
    deadline = time.monotonic() + wait
    for node_id in node_ids:
      thread = self.records[node_id].thread
      if thread is not None:
        thread.join(max(0.0, deadline - time.monotonic()))
    still = [n for n in node_ids if self.records[n].thread.is_alive()]
    for node_id in still:
      frame = sys._current_frames().get(self.records[node_id].thread.ident)  # pylint: disable=protected-access
      where = ''.join(traceback.format_stack(frame)[-3:]) if frame else '?'
      logging.error('Node %s ignored the stop and could not be killed (its '
                    'thread is inside a blocking call); it is abandoned. It '
                    'is at:\n%s', node_id, where)
    return still

  def cleanup(self) -> None:
    """Stops what the nodes serve (e.g. Reverb servers)."""
    for record in self.records.values():
      if record.built is not None and record.built.on_stop is not None:
        try:
          record.built.on_stop()
        except Exception:  # pylint: disable=broad-except
          logging.exception('Stopping node %s failed.', record.node.node_id)


class LocalCourierClient(handles_lib.CourierClient):
  """Calls a CourierNode hosted in this process directly (threads)."""

  def __init__(self, host: NodeHost, handle: handles_lib.Handle,
               executor, connect_timeout: Optional[float]):
    super().__init__(handle, connect_timeout)
    self._host = host
    self._executor = executor
    self._record = host.record(handle._node_id)  # pylint: disable=protected-access

  def _connect(self, method: str) -> None:
    node_id = self._handle._node_id  # pylint: disable=protected-access
    handles_lib.wait_with_log(
        lambda t: self._host.wait_ready(node_id, t), self._what(method),
        self._connect_timeout)

  def _method(self, name: str):
    self._ensure_connected(name)
    return get_public_method(self._record, name)

  def _call(self, method: str, args, kwargs):
    # What the call builds (e.g. a component made lazily at a learner's
    # first step) belongs to the program: `launch.close_at_stop` finds it.
    previous = context.thread_runtime()
    context.set_thread_runtime(self._host.runtime)
    try:
      return self._method(method)(*args, **kwargs)
    finally:
      context.set_thread_runtime(previous)

  def _submit(self, method: str, args, kwargs):
    return self._executor.submit(self._call, method, args, kwargs)


class NodeKilled(SystemExit):
  """Raised in the thread of a node that ignored the program's stop."""


def _why_not_restarted(record: NodeRecord, limit: int, repeated: bool) -> str:
  """A line on why a failed node of a restartable group was not restarted
  ('' when its group has no restarts)."""
  node_id = record.node.node_id
  if not limit:
    return ''
  if record.phase == 'build':
    return (f'(node {node_id} failed in its constructor: not restarted, '
            'the same error would repeat)\n')
  if repeated:
    return (f'(node {node_id} raised the same error twice in a row: not '
            f'restarted again after {record.restarts} restarts)\n')
  if record.restarts:
    return (f'(node {node_id} had been restarted {record.restarts} times: '
            'max_restarts)\n')
  return ''


def _blame(error: BaseException) -> Optional[tuple]:
  """The failed node behind `error` if it is (or was caused by) a
  `NodeStartError`, as (label, node_id, traceback, exception)."""
  seen = set()
  stack = [error]
  while stack:
    e = stack.pop()
    if e is None or id(e) in seen:
      continue
    seen.add(id(e))
    if isinstance(e, errors.NodeStartError):
      return (e.label, e.node_id, e.node_traceback, e.exception)
    stack += [getattr(e, 'cause', None), e.__cause__, e.__context__]
  return None


def get_public_method(record: NodeRecord, name: str):
  """The bound public method `name` of a courier node's object."""
  if record.run_returned:
    raise errors.LaunchError(
        f"Node '{record.node.node_id}' ({record.node.description}) has "
        f'finished: its run() returned, which ends its server (as in '
        f'Launchpad); {name}() cannot be called.')
  instance = record.built.instance
  fn = (None if name.startswith('_') and name != '__call__' else
        getattr(instance, name, None))
  if not callable(fn):
    public = sorted(n for n in dir(type(instance))
                    if not n.startswith('_') and callable(getattr(instance, n)))
    raise AttributeError(
        f"Node '{record.node.node_id}' ({record.node.description}) has no "
        f'public method {name!r}; its public methods are {public}.')
  return fn
