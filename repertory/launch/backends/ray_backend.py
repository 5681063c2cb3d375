"""`local_mp` / `ray`: one Ray actor (process) per node or colocation.

Each unit of the program (a node, or a MultiThreadingColocation) becomes a
named, threaded Ray actor in a per-program namespace. Inside it the nodes run
in threads (`hosting.NodeHost`), so a CourierNode's methods stay callable
while its `run()` loop runs. Handles of other nodes become `RayCourierClient`s
(which find the actor by name and cache it) or `reverb.Client`s.

The launcher watches every actor (`watch()` returns when a node stops the
program, fails, or all its nodes are done), then stops them all: it sets the
stop events, gives the nodes the termination notice to finish, kills the
actors and, for local_mp, shuts the Ray instance it started down.
"""

import collections
import io
import logging as std_logging
import os
import sys
import threading
import time
import types
from typing import Any, Dict, List, Mapping, Optional, Sequence

from absl import logging
import cloudpickle
import ray

from repertory.launch.api import context
from repertory.launch.process import deferred_imports
from repertory.launch.api import errors
from repertory.launch.api import handles as handles_lib
from repertory.launch.backends import hosting
from repertory.launch.backends import local_ray
from repertory.launch.api import nodes as nodes_lib
from repertory.launch.api import program as program_lib
from repertory.launch.backends import ray_auth
from repertory.launch.backends import reaper
from repertory.launch.process import reverb_lite
from repertory.launch.process import startup_gc

_LOOPBACK = '127.0.0.1'
_actor_cache: Dict[tuple, Any] = {}
_actor_cache_lock = threading.Lock()
_WATCH_SECS = 30.0
# Ray records an event for every task (every call to a node is an actor
# task) and its GCS keeps them, up to `task_events_max_num_task_in_gcs`
# tasks (100,000 by default): a long run's gcs_server grew by ~27 MiB per 10
# minutes. Node actors report no task events (`enable_task_events=False`;
# Ray 2.60 still records the first calls made from each new thread), and a
# local_mp instance reports none at all and would keep at most
# `_MAX_TASK_EVENTS_IN_GCS`.
_MAX_TASK_EVENTS_IN_GCS = 10_000
_LOCAL_SYSTEM_CONFIG = {
    'task_events_report_interval_ms': 0,  # 0: no task events are reported.
    'task_events_max_num_task_in_gcs': _MAX_TASK_EVENTS_IN_GCS,
    # The raylet starts its first workers (as many as the machine has CPUs)
    # as soon as it is up, not once the launcher has connected: the first
    # nodes find a process ready (BENCHMARKS.md, lean helper's section).
    'enable_worker_prestart': True,
    # ...and import this module (which a node's actor class unpickles from)
    # while they wait for the launcher, not after it has asked for a node.
    # Nothing heavier: a worker takes no node until its preload is done.
    'preload_python_modules': ['repertory.launch.backends.ray_backend'],
}


def _failure_key(error: errors.NodeError) -> Optional[tuple]:
  """What makes two failures of a node the same error."""
  if type(error) is not errors.NodeError:  # pylint: disable=unidiomatic-typecheck
    return errors.failure_key(error)  # The node's own exception.
  if error.__cause__ is not None:
    return errors.failure_key(error.__cause__)
  lines = (error.node_traceback or '').strip().splitlines()
  return ('traceback', lines[-1] if lines else '')


def _actor_name(unit_id: str) -> str:
  return unit_id.replace('/', '_')


def _get_actor(namespace: str, unit_id: str, what: str,
               timeout: Optional[float]):
  """The named actor of `unit_id`, cached per process."""
  key = (namespace, unit_id)
  with _actor_cache_lock:
    actor = _actor_cache.get(key)
  if actor is not None:
    return actor
  found = []

  def poll(step: float) -> bool:
    end = time.monotonic() + step
    while True:
      try:
        found.append(ray.get_actor(_actor_name(unit_id), namespace=namespace))
        return True
      except ValueError:
        if time.monotonic() >= end:
          return False
        time.sleep(0.05)
  handles_lib.wait_with_log(poll, what, timeout)
  with _actor_cache_lock:
    _actor_cache[key] = found[0]
  return found[0]


def _get_with_log(ref, what: str):
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
    actor = _get_actor(self._namespace, h._unit_id, what,  # pylint: disable=protected-access
                       self._connect_timeout)
    handles_lib.wait_with_log(
        lambda t: ray.get(actor.wait_ready.remote(h._node_id, t)), what,  # pylint: disable=protected-access
        self._connect_timeout)
    self._actor = actor

  def _call(self, method: str, args, kwargs):
    self._ensure_connected(method)
    ref = self._actor.call.remote(self._handle._node_id, method, args, kwargs)  # pylint: disable=protected-access
    return _get_with_log(
        ref, f'{method}() on node {self._handle._node_id}')  # pylint: disable=protected-access

  def _submit(self, method: str, args, kwargs):
    self._ensure_connected(method)
    return self._actor.call.remote(
        self._handle._node_id, method, args, kwargs).future()  # pylint: disable=protected-access


def _remote_client(handle: handles_lib.Handle, namespace: str,
                   connect_timeout: Optional[float]):
  kind = handle._kind  # pylint: disable=protected-access
  if kind == 'courier':
    return RayCourierClient(handle, namespace, connect_timeout)
  if kind == 'reverb':
    what = f"Reverb node '{handle._node_id}' to come up"  # pylint: disable=protected-access
    actor = _get_actor(namespace, handle._unit_id, what, connect_timeout)  # pylint: disable=protected-access
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

  def client(self, handle: handles_lib.Handle):
    node_id = handle._node_id  # pylint: disable=protected-access
    if node_id in self.host.records and handle._kind == 'courier':  # pylint: disable=protected-access
      if self._executor is None:
        import concurrent.futures  # pylint: disable=g-import-not-at-top
        self._executor = concurrent.futures.ThreadPoolExecutor(64)
      return hosting.LocalCourierClient(self.host, handle, self._executor,
                                        self._connect_timeout)
    return _remote_client(handle, self._namespace, self._connect_timeout)


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
    sys.stdout.flush()
    sys.stderr.flush()
    return still


class _Pickler(cloudpickle.Pickler):
  """cloudpickle that keeps the file names of functions pickled by value
  (`__main__` code): cloudpickle writes '<dynamic-code>', and tracebacks in
  the node's process would show neither file nor line."""

  def reducer_override(self, obj):
    if isinstance(obj, types.CodeType):
      reduced = _code_reduce(obj)
      if reduced is not NotImplemented:
        return reduced
    return super().reducer_override(obj)


def _code_reduce(code: types.CodeType):
  try:
    rebuild, args = cloudpickle.cloudpickle._code_reduce(code)  # pylint: disable=protected-access
  except Exception:  # pylint: disable=broad-except
    return NotImplemented
  args = tuple(code.co_filename if a == '<dynamic-code>' else a for a in args)
  return rebuild, args


def _dumps(obj) -> bytes:
  with io.BytesIO() as f:
    _Pickler(f, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return f.getvalue()


def pickle_unit(unit: program_lib.Unit) -> bytes:
  """cloudpickles a unit's nodes; names the culprit when that fails."""
  try:
    return _dumps(unit.nodes)
  except Exception as e:  # pylint: disable=broad-except
    for node in unit.nodes:
      _explain_pickling_failure(node)
    raise errors.NodePicklingError(
        f"Unit '{unit.unit_id}' cannot be pickled: {e!r}") from e


def _picklable(obj) -> Optional[Exception]:
  try:
    cloudpickle.dumps(obj)
    return None
  except Exception as e:  # pylint: disable=broad-except
    return e


def _find_culprit(obj, path: str):
  """The deepest (path, object, error) in `obj` that does not pickle."""
  error = _picklable(obj)
  if error is None:
    return None
  children = []
  if isinstance(obj, (list, tuple)):
    children = [(f'{path}[{i}]', x) for i, x in enumerate(obj)]
  elif isinstance(obj, dict):
    children = [(f'{path}[{k!r}]', v) for k, v in obj.items()]
  elif isinstance(obj, handles_lib.Deferred):
    children = [(f'{path}.ctor', obj.ctor), (f'{path}.args', obj.args),
                (f'{path}.kwargs', obj.kwargs)]
  elif hasattr(obj, '__dict__') and not isinstance(obj, type):
    children = [(f'{path}.{k}', v) for k, v in vars(obj).items()]
  for child_path, child in children:
    found = _find_culprit(child, child_path)
    if found is not None:
      return found
  return path, obj, error


def _explain_pickling_failure(node: nodes_lib.Node) -> None:
  if _picklable(node) is None:
    return
  parts = [('the callable', getattr(node, '_ctor', getattr(node, '_fn', None)))]
  args = node.arguments()
  if args:
    parts += [('args', args[0]), ('kwargs', args[1])]
  else:
    parts += [('node', node)]
  for name, value in parts:
    found = _find_culprit(value, name)
    if found is not None:
      path, obj, error = found
      raise errors.NodePicklingError(
          f"Node '{node.node_id}' ({node.description}) cannot be pickled to "
          f'start it in its own process: {path} = {repr(obj)[:200]} (type '
          f'{type(obj).__name__}) fails with {error!r}. Build such objects '
          'inside the node instead: pass launch.Deferred(make_it, *args) '
          '(e.g. an environment factory) in place of the object.')


class _LauncherRuntime(context.Runtime):
  """The program as seen from the launcher (stop(), dereferencing)."""

  def __init__(self, launcher: 'RayLauncher'):
    super().__init__(launcher.program.program_id,
                     launcher.public_launch_type)
    self._launcher = launcher

  def request_stop(self, reason: str) -> None:
    self._launcher.request_stop(reason)

  def client(self, handle):
    return _remote_client(handle, self._launcher.namespace,
                          handles_lib.DEFAULT_CONNECT_TIMEOUT_SECS)


class RayLauncher:
  """Starts, watches and stops a program's Ray actors."""

  def __init__(self, program: program_lib.Program, launch_type: str,
               resources: Mapping[str, Mapping[str, Any]], terminal: str,
               ray_address: Optional[str], logdir: str,
               termination_notice_secs: float, max_concurrency: int = 256,
               connect_timeout: float = handles_lib.DEFAULT_CONNECT_TIMEOUT_SECS,
               max_restarts: Optional[Mapping[str, int]] = None):
    self.program = program
    # test_mp is local_mp whose launch() returns; nodes see 'test_mp'.
    self.public_launch_type = launch_type
    self.launch_type = 'local_mp' if launch_type == 'test_mp' else launch_type
    self._resources = resources
    self._terminal = terminal
    self._ray_address = ray_address
    self.logdir = logdir
    self._notice_secs = termination_notice_secs
    self._max_concurrency = max_concurrency
    self._connect_timeout = connect_timeout
    self._max_restarts = dict(max_restarts or {})
    self.restarts: Dict[str, int] = collections.Counter()  # unit id -> count
    self._last_failure: Dict[str, Optional[tuple]] = {}  # unit -> failure_key
    self._killed = set()  # Units killed to restart, until they answer.
    self.namespace = f'repertory-{program.name}-{program.program_id[:8]}'
    self.error: Optional[errors.NodeError] = None
    self.actors: Dict[str, Any] = collections.OrderedDict()  # unit id -> actor
    self.unit_info: Dict[str, Dict[str, Any]] = {}
    self._stop = threading.Event()
    self._stop_reason = ''
    self._done = threading.Event()
    self._owns_ray = False
    self._runtime: Optional[_LauncherRuntime] = None
    self._monitor: Optional[threading.Thread] = None
    self._done_units = set()
    self._reaper = None

  # Starting.

  def start(self) -> None:
    try:
      self._start()
    except BaseException:
      self._teardown_actors()
      self._done.set()
      self.finalize()
      raise

  def _start(self) -> None:
    payloads = {u.unit_id: pickle_unit(u) for u in self.program.units}
    if self.launch_type == 'local_mp':
      # The launcher's death (even SIGKILL) takes the Ray instance with it.
      self._reaper = reaper.start_reaper()
    self._init_ray()
    os.makedirs(self.logdir, exist_ok=True)
    print(f'[repertory.launch] program {self.program.name!r} '
          f'({self.launch_type}): node logs in {self.logdir}', flush=True)
    self._runtime = _LauncherRuntime(self)
    context.register(self._runtime)
    actor_class = ray.remote(NodeActor)
    start_refs = {}
    for unit in self.program.units:
      spec = {
          'program_id': self.program.program_id,
          'launch_type': self.public_launch_type,
          'namespace': self.namespace,
          'payload': payloads[unit.unit_id],
          'log_path': (os.path.join(self.logdir,
                                    f'{_actor_name(unit.unit_id)}.log')
                       if self._terminal == 'output_to_files' else None),
          'env': {k: str(v) for k, v in
                  self._resources.get(unit.label, {}).get('env', {}).items()},
          'cpus': list(self._resources.get(unit.label, {}).get('cpus', ())),
          'connect_timeout': self._connect_timeout,
          'authkey': self._runtime.authkey,
          'thread_restarts': {
              n.label: self._max_restarts[n.label] for n in unit.nodes
              if (n.label != unit.label or unit.restarts_in_thread) and
              self._max_restarts.get(n.label)},
      }
      options = self._actor_options(unit)
      actor = actor_class.options(**options).remote(spec)
      self.actors[unit.unit_id] = actor
      start_refs[unit.unit_id] = actor.start.remote()
    self._start_refs = start_refs
    startup_gc.resume()  # If the command line paused it (repertory.run).
    self._monitor = threading.Thread(target=self._watch, daemon=True,
                                     name=f'{self.program.name}-monitor')
    self._monitor.start()

  def _init_ray(self) -> None:
    if self.launch_type == 'local_mp':
      if ray.is_initialized():
        raise errors.LaunchError(
            "launch_type='local_mp' starts its own Ray instance, but this "
            "process is already connected to Ray; use launch_type='ray' to "
            'launch on that instance.')
      # Without the Ray processes a local program does not use (local_ray).
      local_ray.start(_LOCAL_SYSTEM_CONFIG,
                      forward_output=self._terminal == 'current_terminal')
      self._owns_ray = True
    elif not ray.is_initialized():
      local_ray.connect(self._ray_address)
      self._owns_ray = True  # a connection to disconnect, not the cluster.
    # Nodes run whatever a caller of Ray's ports sends: refuse a Ray
    # instance that takes callers without its token.
    ray_auth.check_token_auth(self.launch_type)

  def _actor_options(self, unit: program_lib.Unit) -> Dict[str, Any]:
    options: Dict[str, Any] = {
        'name': _actor_name(unit.unit_id),
        'namespace': self.namespace,
        'max_concurrency': self._max_concurrency,
        'max_restarts': self._max_restarts.get(unit.label, 0),
        # No per-call task events (they pile up in the GCS; see above).
        'enable_task_events': False,
    }
    if options['max_restarts']:
      # Calls to a restarting node wait for it instead of failing.
      options['max_task_retries'] = -1
    if unit.colocate_with is not None:
      anchor = self.actors[unit.colocate_with]
      info = _get_with_log(anchor.info.remote(),
                           f'unit {unit.colocate_with} to be placed')
      options['num_cpus'] = 0
      options['scheduling_strategy'] = (
          ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
              info['ray_node_id'], soft=False))
      return options
    resources = self._resources.get(unit.label, {})
    # Without an explicit num_cpus, Ray makes an actor that asks for other
    # resources hold one CPU for its lifetime; nodes ask for none by default.
    options['num_cpus'] = 0
    for key in ('num_cpus', 'num_gpus', 'memory', 'resources'):
      if key in resources:
        options[key] = resources[key]
    return options

  # Watching.

  def _watch(self) -> None:
    pending = {a.watch.remote(_WATCH_SECS): unit_id
               for unit_id, a in self.actors.items()}
    started = set()
    # Restarted units whose new process has not started yet: their watch
    # waits for it (a watch sent earlier may reach the old process).
    awaiting: Dict[str, Optional[int]] = {}  # unit id -> the old pid
    done_units = self._done_units
    labels = {u.unit_id: u.label for u in self.program.units}
    last_placement_log = time.monotonic()
    try:
      while not self._stop.is_set():
        if pending:
          ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        else:
          ready = []
          time.sleep(0.5)
        for ref in ready:
          unit_id = pending.pop(ref)
          result = self._result_of(ref, unit_id)
          if isinstance(result, tuple) and result[0] == 'restarted':
            awaiting[unit_id] = result[1]
            started.discard(unit_id)
            continue
          if result is None:
            continue
          kind = result[0]
          if kind == 'error':
            _, label, node_id, tb, exception, phase = result
            error = errors.node_failure(
                label, node_id, tb, errors.loads_or_none(exception),
                self._logfile(self._unit_of(node_id)), phase)
            old_pid = self._pid_of(unit_id)
            if self._restarted_in_thread(unit_id, label):
              self._fail(error)  # Its restarts in the thread are spent.
            elif self._restart(unit_id, error, kill=True):
              awaiting[unit_id] = old_pid
              started.discard(unit_id)
            else:
              self._fail(error)
          elif kind == 'stop':
            self.request_stop(f'{result[1]} (in unit {unit_id})')
          elif kind == 'done':
            done_units.add(unit_id)
          else:
            pending[self.actors[unit_id].watch.remote(_WATCH_SECS)] = unit_id
        for unit_id in [u for u in awaiting if self._restarted(u, awaiting[u])]:
          del awaiting[unit_id]
          pending[self.actors[unit_id].watch.remote(_WATCH_SECS)] = unit_id
        if len(done_units) == len(self.actors):
          self.request_stop('every node finished')
        for unit_id, ref in list(self._start_refs.items()):
          if unit_id not in started and ray.wait([ref], timeout=0)[0]:
            started.add(unit_id)
            error = start_error(ref, labels[unit_id], unit_id,
                                self._logfile(unit_id))
            if error is not None:
              self._fail(error)
        if (len(started) < len(self.actors) and
            time.monotonic() - last_placement_log > 30):
          last_placement_log = time.monotonic()
          waiting = [u for u in self.actors if u not in started]
          logging.warning(
              'Still waiting for Ray to start units %s (resources asked: %s).',
              waiting, {u: self._resources.get(labels[u], {}) for u in waiting})
    except BaseException:  # pylint: disable=broad-except
      logging.exception('The monitor of program %r failed.', self.program.name)
    finally:
      logging.info('Stopping program %r: %s.', self.program.name,
                   self._stop_reason)
      self._teardown_actors()
      self._done.set()

  def _restarted_in_thread(self, unit_id: str, label: str) -> bool:
    """Whether a failed node of group `label` in unit `unit_id` was
    restarted in its thread (not by restarting the process)."""
    unit = next(u for u in self.program.units if u.unit_id == unit_id)
    return unit.restarts_in_thread and label == unit.label

  def _pid_of(self, unit_id: str) -> Optional[int]:
    """The process id the unit's latest start() reported, if it answered."""
    ref = self._start_refs.get(unit_id)
    if ref is None or not ray.wait([ref], timeout=0)[0]:
      return None
    try:
      return ray.get(ref)['pid']
    except Exception:  # pylint: disable=broad-except
      return None

  def _restarted(self, unit_id: str, old_pid: Optional[int]) -> bool:
    """Whether a restarted unit's new process started (a start() that the
    old process answered is sent again)."""
    ref = self._start_refs[unit_id]
    if not ray.wait([ref], timeout=0)[0]:
      return False
    if old_pid is not None and self._pid_of(unit_id) == old_pid:
      self._start_refs[unit_id] = self.actors[unit_id].start.remote()
      return False
    return True  # Started (or its start failed: the watch will say so).

  def _result_of(self, ref, unit_id: str):
    try:
      result = ray.get(ref)
      self._killed.discard(unit_id)  # Its new process answered.
      return result
    except Exception as e:  # pylint: disable=broad-except
      if self._stop.is_set():
        return None
      if (isinstance(e, ray.exceptions.ActorUnavailableError) and
          unit_id in self._killed):
        # A call that reached the process this launcher killed to restart
        # the unit (not a new failure): ask the new process to start.
        self._killed.discard(unit_id)
        old_pid = self._pid_of(unit_id)
        self._start_refs[unit_id] = self.actors[unit_id].start.remote()
        return ('restarted', old_pid)
      unit = next(u for u in self.program.units if u.unit_id == unit_id)
      error = errors.NodeError(
          unit.label, unit_id,
          f'The process of unit {unit_id} died or could not start:\n{e}',
          self._logfile(unit_id))
      old_pid = self._pid_of(unit_id)
      if self._restart(unit_id, error, kill=False):
        return ('restarted', old_pid)
      self._fail(error)
      return None

  def _restart(self, unit_id: str, error: errors.NodeError,
               kill: bool) -> bool:
    """Restarts a failed unit if its group's max_restarts allows it.

    Ray restarts a dead actor's process itself (`max_restarts`); a node that
    raised has its process killed first (`kill`). The restarted actor is
    asked to start its nodes again. Returns False if no restart is left.
    """
    unit = next(u for u in self.program.units if u.unit_id == unit_id)
    limit = self._max_restarts.get(unit.label, 0)
    if self._stop.is_set() or self.restarts[unit_id] >= limit:
      return False
    # A node's error (not its process's death) in its constructor, or the
    # same as its last one, would only repeat.
    key = _failure_key(error) if kill else None
    if kill and error.phase == 'build':
      return False  # _fail's line says "in its constructor".
    if kill and key == self._last_failure.get(unit_id):
      logging.error('Unit %s raised the same error twice in a row: not '
                    'restarted again.', unit_id)
      return False
    self._last_failure[unit_id] = key
    self.restarts[unit_id] += 1
    logging.warning('Unit %s failed; restarting it (%d of max_restarts=%d): '
                    '%s', unit_id, self.restarts[unit_id], limit,
                    errors.one_line(error))
    actor = self.actors[unit_id]
    if kill:
      self._killed.add(unit_id)
      ray.kill(actor, no_restart=False)
    self._start_refs[unit_id] = actor.start.remote()
    return True

  def _unit_of(self, node_id: str) -> str:
    for unit in self.program.units:
      if any(n.node_id == node_id for n in unit.nodes):
        return unit.unit_id
    return node_id

  def labels_done(self, labels, any_of: bool) -> bool:
    units = [u.unit_id for u in self.program.units
             if any(n.label in labels for n in u.nodes)]
    done = [u in self._done_units for u in units]
    return (any(done) if any_of else all(done)) if done else False

  def _logfile(self, unit_id: str) -> Optional[str]:
    if self._terminal != 'output_to_files':
      return None
    return os.path.join(self.logdir, f'{_actor_name(unit_id)}.log')

  def _fail(self, error: errors.NodeError) -> None:
    if self.error is None:
      self.error = error
      if not self._stop.is_set():
        logging.error('Stopping program %r: %s', self.program.name,
                      errors.one_line(error))
    self.request_stop(f'node {error.node_id} failed')

  def request_stop(self, reason: str) -> None:
    if not self._stop.is_set():
      self._stop_reason = reason
      self._stop.set()
    if self._monitor is None:
      self._done.set()

  # Stopping.

  def _teardown_actors(self) -> None:
    actors = list(self.actors.values())
    if not actors or not ray.is_initialized():
      return
    try:
      # Stop handlers (e.g. a learner's final checkpoint) and run loops
      # share the termination notice.
      deadline = time.monotonic() + self._notice_secs
      refs = [a.notify_stop.remote() for a in actors]
      ray.wait(refs, num_returns=len(refs),
               timeout=max(5.0, self._notice_secs))
      remaining = max(1.0, deadline - time.monotonic())
      joins = {a.join.remote(remaining): u for u, a in self.actors.items()}
      ready, not_ready = ray.wait(list(joins), num_returns=len(joins),
                                  timeout=remaining + 5.0)
      for ref in ready:
        try:
          still = ray.get(ref)
        except Exception:  # pylint: disable=broad-except
          continue
        if still:
          logging.warning('Nodes %s did not stop within the termination '
                          'notice of %.1f s; killing them.', still,
                          self._notice_secs)
      for ref in not_ready:
        logging.warning('Unit %s did not answer within the termination '
                        'notice; killing it.', joins[ref])
    finally:
      for actor in actors:
        try:
          ray.kill(actor, no_restart=True)
        except Exception:  # pylint: disable=broad-except
          pass
      self.actors.clear()

  def wait_done(self, timeout: Optional[float]) -> bool:
    return self._done.wait(timeout)

  def finalize(self) -> None:
    """Unregisters and (if this launcher connected or started Ray) shuts Ray
    down; called once, in the thread that waits for the program."""
    if self._runtime is not None:
      context.unregister(self._runtime)
    with _actor_cache_lock:
      for key in [k for k in _actor_cache if k[0] == self.namespace]:
        del _actor_cache[key]
    if self._owns_ray and ray.is_initialized():
      ray.shutdown()
      self._owns_ray = False
    if self._reaper is not None:
      self._reaper.release()
      self._reaper = None
