"""`local_mp` / `ray`: one Ray actor (process) per node or colocation.

Each unit of the program (a node, or a MultiThreadingColocation) becomes a
named, threaded Ray actor in a per-program namespace (`ray_node.NodeActor`;
its nodes pickled by `pickling`). Inside it the nodes run in threads
(`hosting.NodeHost`), so a CourierNode's methods stay callable while its
`run()` loop runs.

The launcher watches every actor (`watch()` returns when a node stops the
program, fails, or all its nodes are done), then stops them all: it sets the
stop events, gives the nodes the termination notice to finish, kills the
actors and, for local_mp, shuts the Ray instance it started down.
"""

import collections
import os
import threading
import time
from typing import Any, Dict, Mapping, Optional

from absl import logging
import ray

from repertory.launch.api import context
from repertory.launch.api import errors
from repertory.launch.api import handles as handles_lib
from repertory.launch.api import program as program_lib
from repertory.launch.backends import local_ray
from repertory.launch.backends import pickling
from repertory.launch.backends import ray_auth
from repertory.launch.backends import ray_node
from repertory.launch.backends import ray_restarts
from repertory.launch.backends import reaper
from repertory.launch.process import startup_gc

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
    # nodes find a process ready.
    'enable_worker_prestart': True,
    # ...and import this module (which a node's actor class unpickles from)
    # while they wait for the launcher, not after it has asked for a node.
    # Nothing heavier: a worker takes no node until its preload is done.
    'preload_python_modules': ['repertory.launch.backends.ray_node'],
}

class _LauncherRuntime(context.Runtime):
  """The program as seen from the launcher (stop(), dereferencing)."""

  def __init__(self, launcher: 'RayLauncher'):
    super().__init__(launcher.program.program_id,
                     launcher.public_launch_type)
    self._launcher = launcher

  def request_stop(self, reason: str) -> None:
    self._launcher.request_stop(reason)

  def client(self, handle):
    return ray_node.remote_client(handle, self._launcher.namespace,
                          handles_lib.DEFAULT_CONNECT_TIMEOUT_SECS)


class RayLauncher(ray_restarts.Restarts):
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
    payloads = {u.unit_id: pickling.pickle_unit(u) for u in self.program.units}
    if self.launch_type == 'local_mp':
      # The launcher's death (even SIGKILL) takes the Ray instance with it.
      self._reaper = reaper.start_reaper()
    self._init_ray()
    os.makedirs(self.logdir, exist_ok=True)
    print(f'[repertory.launch] program {self.program.name!r} '
          f'({self.launch_type}): node logs in {self.logdir}', flush=True)
    self._runtime = _LauncherRuntime(self)
    context.register(self._runtime)
    actor_class = ray.remote(ray_node.NodeActor)
    start_refs = {}
    for unit in self.program.units:
      spec = {
          'program_id': self.program.program_id,
          'launch_type': self.public_launch_type,
          'namespace': self.namespace,
          'unit_id': unit.unit_id,
          'units': [u.unit_id for u in self.program.units],
          'payload': payloads[unit.unit_id],
          'log_path': (os.path.join(self.logdir,
                                    f'{ray_node.actor_name(unit.unit_id)}.log')
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
    elif local_ray.take_checked_connection():
      self._owns_ray = True  # check_cluster's connection is ours.
    # Nodes run whatever a caller of Ray's ports sends: refuse a Ray
    # instance that takes callers without its token.
    ray_auth.check_token_auth(self.launch_type)
    if self.launch_type == 'ray':
      local_ray.check_cluster_resources(self._resources, self._ray_address)

  def _actor_options(self, unit: program_lib.Unit) -> Dict[str, Any]:
    options: Dict[str, Any] = {
        'name': ray_node.actor_name(unit.unit_id),
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
      info = ray_node.get_with_log(anchor.info.remote(),
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
            error = ray_node.start_error(ref, labels[unit_id], unit_id,
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
    return os.path.join(self.logdir, f'{ray_node.actor_name(unit_id)}.log')

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
    with ray_node.actor_cache_lock:
      for key in [k for k in ray_node.actor_cache if k[0] == self.namespace]:
        del ray_node.actor_cache[key]
    if self._owns_ray and ray.is_initialized():
      ray.shutdown()
      self._owns_ray = False
    if self._reaper is not None:
      self._reaper.release()
      self._reaper = None
