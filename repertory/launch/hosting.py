"""Brings nodes up in threads of the current process and keeps their state.

Used by the threads backend (all nodes of a program) and by each Ray actor
(the nodes of one unit).
"""

import threading
import time
import traceback
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from absl import logging

from repertory.launch import context
from repertory.launch import errors
from repertory.launch import handles as handles_lib
from repertory.launch import nodes as nodes_lib


class NodeRecord:
  """The state of one node in this process."""

  def __init__(self, node: nodes_lib.Node):
    self.node = node
    self.built: Optional[nodes_lib.Built] = None
    self.ready = threading.Event()      # built (or failed to build)
    self.finished = threading.Event()   # run() returned (or raised)
    self.error: Optional[str] = None    # formatted traceback
    self.thread: Optional[threading.Thread] = None
    self.restarts = 0                   # times rebuilt after a failure

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
    self._max_restarts = dict(max_restarts or {})
    self._host_ip = host_ip
    self._on_error = on_error
    self._on_finished = on_finished
    self.records: Dict[str, NodeRecord] = {
        n.node_id: NodeRecord(n) for n in nodes}

  def start(self) -> None:
    for record in self.records.values():
      record.thread = threading.Thread(
          target=self._run_node, args=(record,), daemon=True,
          name=f'node {record.node.node_id}')
      record.thread.start()

  def _run_node(self, record: NodeRecord) -> None:
    context.set_thread_runtime(self._runtime)
    node = record.node
    ctx = nodes_lib.BuildContext(
        resolve=lambda nest: handles_lib.resolve(nest, self._runtime.client),
        host_ip=self._host_ip, stop_event=self._runtime.stop_event)
    try:
      while True:
        try:
          self._build_and_run(record, ctx)
          break
        except Exception:  # pylint: disable=broad-except
          limit = self._max_restarts.get(node.label, 0)
          if self._runtime.stop_event.is_set() or record.restarts >= limit:
            raise
          record.restarts += 1
          logging.error('Node %s (%s) failed; restarting it (%d of '
                        'max_restarts=%d):\n%s', node.node_id,
                        node.description, record.restarts, limit,
                        traceback.format_exc())
    except BaseException:  # pylint: disable=broad-except
      record.error = traceback.format_exc()
      if record.restarts:
        record.error += (f'(node {node.node_id} had been restarted '
                         f'{record.restarts} times: max_restarts)\n')
      if self._runtime.stop_event.is_set():
        logging.warning('Node %s raised while the program was stopping:\n%s',
                        node.node_id, record.error)
      else:
        logging.error('Node %s (%s) failed:\n%s', node.node_id,
                      node.description, record.error)
        self._on_error(record)
    finally:
      record.finished.set()
    if record.error is None:
      self._on_finished(record)

  def _build_and_run(self, record: NodeRecord,
                     ctx: nodes_lib.BuildContext) -> None:
    built = None
    try:
      built = record.node.build(ctx)
    finally:
      if built is not None or record.built is None:
        record.built = built  # A rebuilt node keeps serving its old object
      record.ready.set()      # until its replacement is built.
    if built.run is not None:
      built.run()

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
      raise errors.LaunchError(
          f"Node '{node_id}' ({record.node.description}) failed to start:\n"
          f'{record.error}')
    return True

  def all_done(self) -> bool:
    """True when every node's run() returned and none of them serves."""
    return all(r.finished.is_set() and not r.serving
               for r in self.records.values())

  def first_error(self) -> Optional[NodeRecord]:
    for record in self.records.values():
      if record.error is not None:
        return record
    return None

  def join(self, deadline: float) -> List[str]:
    """Waits until `deadline` (monotonic) for run loops; returns the ids of
    the nodes still running."""
    for record in self.records.values():
      if record.thread is not None:
        record.thread.join(max(0.0, deadline - time.monotonic()))
    return [node_id for node_id, r in self.records.items()
            if r.thread is not None and r.thread.is_alive()]

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
    return self._method(method)(*args, **kwargs)

  def _submit(self, method: str, args, kwargs):
    return self._executor.submit(self._call, method, args, kwargs)


def get_public_method(record: NodeRecord, name: str):
  """The bound public method `name` of a courier node's object."""
  instance = record.built.instance
  fn = None if name.startswith('_') else getattr(instance, name, None)
  if not callable(fn):
    public = sorted(n for n in dir(type(instance))
                    if not n.startswith('_') and callable(getattr(instance, n)))
    raise AttributeError(
        f"Node '{record.node.node_id}' ({record.node.description}) has no "
        f'public method {name!r}; its public methods are {public}.')
  return fn
