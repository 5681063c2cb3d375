"""Inside a program's Ray actors: the actor that hosts a unit, its view of
the program, and the clients of other units' nodes.

Each unit of the program (a node, or a MultiThreadingColocation) becomes a
named, threaded Ray actor (`NodeActor`) in a per-program namespace. Inside
it the nodes run in threads (`hosting.NodeHost`), so a CourierNode's methods
stay callable while its `run()` loop runs. Handles of other nodes become
`RayCourierClient`s (which find the actor by name and cache it) or Reverb
clients. `ray_backend.RayLauncher` creates, watches and stops the actors.
"""

import logging as std_logging
import os
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from absl import logging
import cloudpickle
import ray

from repertory.launch.api import context
from repertory.launch.api import errors
from repertory.launch.api import handles as handles_lib
from repertory.launch.backends import hosting
from repertory.launch.process import deferred_imports
from repertory.launch.process import reverb_lite
from repertory.launch.process import startup_gc

_LOOPBACK = '127.0.0.1'
# Actors found by name, per process: (namespace, unit id) -> actor handle.
actor_cache: Dict[tuple, Any] = {}
actor_cache_lock = threading.Lock()


def actor_name(unit_id: str) -> str:
  return unit_id.replace('/', '_')


def get_actor(namespace: str, unit_id: str, what: str,
               timeout: Optional[float]):
  """The named actor of `unit_id`, cached per process."""
  key = (namespace, unit_id)
  with actor_cache_lock:
    actor = actor_cache.get(key)
  if actor is not None:
    return actor
  found = []

  def poll(step: float) -> bool:
    end = time.monotonic() + step
    while True:
      try:
        found.append(ray.get_actor(actor_name(unit_id), namespace=namespace))
        return True
      except ValueError:
        if time.monotonic() >= end:
          return False
        time.sleep(0.05)
  handles_lib.wait_with_log(poll, what, timeout)
  with actor_cache_lock:
    actor_cache[key] = found[0]
  return found[0]


def get_with_log(ref, what: str):
  """ray.get that says what it waits for every minute."""
  while True:
    try:
      return ray.get(ref, timeout=60.0)
    except ray.exceptions.GetTimeoutError:
      logging.warning('Still waiting for %s.', what)


def start_error(ref, label: str, unit_id: str,
                logfile: Optional[str]) -> Optional[errors.NodeError]:
  """The error of a finished `NodeActor.start` call `ref` that raised (its
  nodes never started), or None. A process that died is not one: its
  watch reports that, and the unit may be restarted."""
  try:
    ray.get(ref, timeout=0)
  except ray.exceptions.RayTaskError as e:
    return errors.NodeError(
        label, unit_id, f'Unit {unit_id} could not start its nodes:\n{e}',
        logfile)
  except Exception:  # pylint: disable=broad-except
    return None
  return None


class RayCourierClient(handles_lib.CourierClient):
  """Calls a CourierNode hosted in a Ray actor."""

  def __init__(self, handle: handles_lib.Handle, namespace: str,
               connect_timeout: Optional[float]):
    super().__init__(handle, connect_timeout)
    self._namespace = namespace
    self._actor = None

  def _connect(self, method: str) -> None:
    what = self._what(method)
    h = self._handle
    actor = get_actor(self._namespace, h._unit_id, what,  # pylint: disable=protected-access
                       self._connect_timeout)
    handles_lib.wait_with_log(
        lambda t: ray.get(actor.wait_ready.remote(h._node_id, t)), what,  # pylint: disable=protected-access
        self._connect_timeout)
    self._actor = actor

  def _call(self, method: str, args, kwargs):
    self._ensure_connected(method)
    ref = self._actor.call.remote(self._handle._node_id, method, args, kwargs)  # pylint: disable=protected-access
    return get_with_log(
        ref, f'{method}() on node {self._handle._node_id}')  # pylint: disable=protected-access

  def _submit(self, method: str, args, kwargs):
    self._ensure_connected(method)
    return self._actor.call.remote(
        self._handle._node_id, method, args, kwargs).future()  # pylint: disable=protected-access


def remote_client(handle: handles_lib.Handle, namespace: str,
                   connect_timeout: Optional[float]):
  kind = handle._kind  # pylint: disable=protected-access
  if kind == 'courier':
    return RayCourierClient(handle, namespace, connect_timeout)
  if kind == 'reverb':
    what = f"Reverb node '{handle._node_id}' to come up"  # pylint: disable=protected-access
    actor = get_actor(namespace, handle._unit_id, what, connect_timeout)  # pylint: disable=protected-access
    handles_lib.wait_with_log(
        lambda t: ray.get(actor.wait_ready.remote(handle._node_id, t)), what,  # pylint: disable=protected-access
        connect_timeout)
    address = ray.get(actor.reverb_address.remote(handle._node_id))  # pylint: disable=protected-access
    # A writer-only node (an actor) then never imports TensorFlow.
    return reverb_lite.connect(address)
  raise errors.LaunchError(
      f"The handle of node '{handle._node_id}' ({handle._description}) cannot "  # pylint: disable=protected-access
      'be dereferenced: only CourierNode and ReverbNode handles can.')


class RayNodeRuntime(context.Runtime):
  """The program as seen from inside one Ray actor."""

  def __init__(self, spec: Mapping[str, Any]):
    super().__init__(spec['program_id'], spec['launch_type'])
    self._namespace = spec['namespace']
    self._other_units = [u for u in spec.get('units', ())
                         if u != spec.get('unit_id')]
    self._connect_timeout = spec['connect_timeout']
    self._cond = threading.Condition()
    self._stop_reason: Optional[str] = None
    self._error: Optional[hosting.NodeRecord] = None
    self._executor = None
    nodes = cloudpickle.loads(spec['payload'])
    # The program's channel key, from the launcher through Ray's (token-
    # authenticated) actor creation.
    self.authkey = spec['authkey']
    # What node servers (channels) bind: loopback on one machine (inside a
    # worker, Ray reports the outward address), the node's address on a
    # cluster.
    self.host_ip = (_LOOPBACK if spec['launch_type'] == 'local_mp' else
                    ray.util.get_node_ip_address())
    # Nodes that share a process with another group's (Program.
    # share_process), or with their own group's (Program.spread_group), are
    # restarted in their thread, as the threads backend does; the process
    # itself restarts as its own group says.
    self.host = hosting.NodeHost(
        self, nodes, host_ip=self.host_ip,
        on_error=self._on_event, on_finished=self._on_event,
        max_restarts=spec.get('thread_restarts'))

  def _on_event(self, record: hosting.NodeRecord) -> None:
    with self._cond:
      if record.error is not None and self._error is None:
        self._error = record
      self._cond.notify_all()

  def stop_requested(self) -> bool:
    return self._stop_reason is not None or self.stop_event.is_set()

  def request_stop(self, reason: str) -> None:
    with self._cond:
      if self._stop_reason is None:
        self._stop_reason = reason
      self._cond.notify_all()

  def watch(self, timeout: float):
    with self._cond:
      self._cond.wait_for(
          lambda: (self._error is not None or self._stop_reason is not None or
                   self.host.all_done()), timeout)
      if self._error is not None:
        record = self._error
        if record.blame is not None:  # A node it depends on failed to start.
          label, node_id, tb, exception = record.blame
          phase = 'build'
        else:
          node = record.node
          label, node_id, tb, exception = (node.label, node.node_id,
                                           record.error, record.exception)
          phase = record.phase
        return ('error', label, node_id, tb, errors.dumps_or_none(exception),
                phase)
      if self._stop_reason is not None:
        return ('stop', self._stop_reason)
      if self.host.all_done():
        return ('done',)
      return ('pending',)

  def wait_until_built(self, timeout: float) -> bool:
    """This unit's nodes, then every other unit's (asked of its actor)."""
    deadline = time.monotonic() + timeout
    if not self.host.all_built(timeout):
      return False
    for unit_id in self._other_units:
      left = deadline - time.monotonic()
      if left <= 0:
        return False
      try:
        actor = get_actor(self._namespace, unit_id, f'unit {unit_id}', left)
        if not ray.get(actor.all_built.remote(left), timeout=left + 5.0):
          return False
      except (TimeoutError, ray.exceptions.GetTimeoutError):
        return False
      except Exception as e:  # pylint: disable=broad-except
        # Gone (failed, restarting or stopped): its failure is the
        # launcher's to report; this node need not wait for it.
        logging.info('Not waiting for unit %s to be built: %s', unit_id,
                     str(e).splitlines()[0] if str(e) else type(e).__name__)
    return True

  def client(self, handle: handles_lib.Handle):
    node_id = handle._node_id  # pylint: disable=protected-access
    if node_id in self.host.records and handle._kind == 'courier':  # pylint: disable=protected-access
      if self._executor is None:
        import concurrent.futures  # pylint: disable=g-import-not-at-top
        self._executor = concurrent.futures.ThreadPoolExecutor(64)
      return hosting.LocalCourierClient(self.host, handle, self._executor,
                                        self._connect_timeout)
    return remote_client(handle, self._namespace, self._connect_timeout)


def _redirect_output(path: str) -> None:
  """Sends this process's stdout and stderr (fds 1 and 2) to `path`."""
  sys.stdout.flush()
  sys.stderr.flush()
  fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  os.dup2(fd, 1)
  os.dup2(fd, 2)
  os.close(fd)


def pin_process(cpus: Sequence[int]) -> None:
  """Pins every thread of this process to the CPU cores `cpus` (threads
  started later inherit it); a core this machine lacks raises."""
  for tid in os.listdir('/proc/self/task'):
    try:
      os.sched_setaffinity(int(tid), set(cpus))
    except ProcessLookupError:
      pass  # The thread ended meanwhile.


class NodeActor:
  """The Ray actor hosting one unit (wrapped with ray.remote at launch)."""

  def __init__(self, spec: Mapping[str, Any]):
    # A process of nodes only: no collector passes over the imports until
    # its nodes are built (NodeHost resumes it).
    startup_gc.pause()
    deferred_imports.defer()  # Before the node's modules import TensorFlow.
    if spec['log_path']:
      _redirect_output(spec['log_path'])
    os.environ.update(spec['env'])
    if spec.get('cpus'):
      pin_process(spec['cpus'])
    std_logging.getLogger().setLevel(std_logging.INFO)
    logging.set_verbosity(logging.INFO)
    self._spec = spec
    self._started = False
    self._runtime = RayNodeRuntime(spec)
    context.register(self._runtime)

  def start(self) -> Dict[str, Any]:
    if not self._started:  # Idempotent: the launcher may ask again.
      self._started = True
      self._runtime.host.start()
    return self.info()

  def info(self) -> Dict[str, Any]:
    return {'pid': os.getpid(),
            'ray_node_id': ray.get_runtime_context().get_node_id(),
            'ip': ray.util.get_node_ip_address()}

  def wait_ready(self, node_id: str, timeout: float) -> bool:
    return self._runtime.host.wait_ready(node_id, timeout)

  def all_built(self, timeout: float) -> bool:
    return self._runtime.host.all_built(timeout)

  def call(self, node_id: str, method: str, args, kwargs):
    host = self._runtime.host
    handles_lib.wait_with_log(
        lambda t: host.wait_ready(node_id, t),
        f"node '{node_id}' to come up to call {method}()",
        self._spec['connect_timeout'])
    return hosting.get_public_method(host.record(node_id), method)(
        *args, **kwargs)

  def reverb_address(self, node_id: str) -> str:
    return self._runtime.host.record(node_id).built.address

  # Not retried when the actor restarts: the launcher must see the failure
  # (and start the restarted node) while calls to nodes are retried.
  @ray.method(max_task_retries=0)
  def watch(self, timeout: float):
    return self._runtime.watch(timeout)

  def notify_stop(self) -> None:
    self._runtime.run_stop_handlers()

  def join(self, timeout: float) -> List[str]:
    still = self._runtime.host.join(time.monotonic() + timeout)
    self._runtime.host.cleanup()
    self._runtime.run_closers()
    sys.stdout.flush()
    sys.stderr.flush()
    return still
