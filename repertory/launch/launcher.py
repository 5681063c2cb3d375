"""`launch()`: runs a program in threads, in local processes or on Ray."""

import contextlib
import os
import signal
import threading
import time
from typing import Any, Dict, Mapping, Optional

from absl import flags
from absl import logging

from repertory.launch import errors
from repertory.launch import program as program_lib

LAUNCH_TYPES = ('test_mt', 'local_mt', 'local_mp', 'ray')
TERMINALS = ('output_to_files', 'current_terminal')
_RESOURCE_KEYS = ('num_cpus', 'num_gpus', 'memory', 'resources', 'env')
DEFAULT_TERMINATION_NOTICE_SECS = 10.0

_LAUNCH_TYPE = flags.DEFINE_enum(
    'lp_launch_type', 'local_mt', LAUNCH_TYPES,
    'How to launch a repertory program: test_mt (threads, launch() returns), '
    'local_mt (threads), local_mp (a local Ray instance, one process per node '
    'or colocation) or ray (an existing Ray cluster, see --ray_address).')
_RAY_ADDRESS = flags.DEFINE_string(
    'ray_address', None,
    "Address of the Ray cluster for --lp_launch_type=ray (e.g. '127.0.0.1:6379' "
    "from `ray start --head`); default: the cluster this process is connected "
    "to, else 'auto'.")
_RESOURCES = flags.DEFINE_string(
    'lp_resources', None,
    'Resources per group label for local_mp/ray, e.g. '
    '"learner=cpu:1,gpu:1 actor=cpu:1,my_res:1".')
_NOTICE = flags.DEFINE_float(
    'lp_termination_notice_secs', DEFAULT_TERMINATION_NOTICE_SECS,
    'Seconds nodes get to finish (e.g. write a final checkpoint) after the '
    'program starts stopping, before they are killed.')


def parse_resources(spec: str) -> Dict[str, Dict[str, Any]]:
  """Parses "learner=cpu:1,gpu:1 actor=cpu:1,my_res:1" into local_resources.

  `cpu`, `gpu` and `memory` (bytes) map to Ray's num_cpus, num_gpus and
  memory; any other name is a custom Ray resource.
  """
  result: Dict[str, Dict[str, Any]] = {}
  for group in spec.split():
    label, sep, items = group.partition('=')
    if not sep or not label or not items:
      raise ValueError(f'Bad resources entry {group!r} in {spec!r}: expected '
                       'label=name:amount[,name:amount...], e.g. '
                       '"learner=cpu:1,gpu:1 actor=cpu:1,my_res:1".')
    entry: Dict[str, Any] = {}
    for item in items.split(','):
      name, sep, amount = item.partition(':')
      try:
        value = float(amount)
      except ValueError:
        value = None
      if not sep or not name or value is None:
        raise ValueError(f'Bad resource {item!r} for group {label!r} in '
                         f'{spec!r}: expected name:amount, e.g. cpu:1.')
      if name == 'cpu':
        entry['num_cpus'] = value
      elif name == 'gpu':
        entry['num_gpus'] = value
      elif name == 'memory':
        entry['memory'] = value
      else:
        entry.setdefault('resources', {})[name] = value
    result[label] = entry
  return result


def _check_resources(program: program_lib.Program,
                     local_resources: Optional[Mapping[str, Any]]
                     ) -> Dict[str, Dict[str, Any]]:
  if not local_resources:
    return {}
  groups = sorted(program.groups)
  for label, entry in local_resources.items():
    if label not in program.groups:
      raise ValueError(f'local_resources names group {label!r}, which is not '
                       f'in program {program.name!r}; its groups are {groups}.')
    if not isinstance(entry, Mapping):
      raise ValueError(f'local_resources[{label!r}] must be a dict with keys '
                       f'from {_RESOURCE_KEYS}, got {entry!r}.')
    for key in entry:
      if key not in _RESOURCE_KEYS:
        raise ValueError(f'local_resources[{label!r}] has unknown key {key!r}; '
                         f'valid keys are {_RESOURCE_KEYS}.')
  return {k: dict(v) for k, v in local_resources.items()}


class LaunchedProgram:
  """A running (or finished) program, as returned by `launch()`."""

  def __init__(self, backend, program: program_lib.Program, launch_type: str,
               logdir: Optional[str]):
    self._backend = backend
    self.program = program
    self.launch_type = launch_type
    self.logdir = logdir
    self._finalized = False
    self._lock = threading.Lock()

  @property
  def error(self) -> Optional[errors.NodeError]:
    """The first node failure, if any."""
    return self._backend.error

  def stop(self, timeout: Optional[float] = None) -> bool:
    """Stops the program and waits for it (re-raises a node failure)."""
    self._backend.request_stop('LaunchedProgram.stop() was called')
    return self.wait(timeout)

  def wait(self, timeout: Optional[float] = None) -> bool:
    """Waits until the program has stopped; False if `timeout` s passed.

    Raises:
      NodeError: if a node failed (naming it, with its traceback).
    """
    if not self._backend.wait_done(timeout):
      return False
    with self._lock:
      if not self._finalized:
        self._finalized = True
        self._backend.finalize()
    if self._backend.error is not None:
      raise self._backend.error
    return True

  def is_running(self) -> bool:
    return not self._backend.wait_done(0)


def _sigterm_handler(signum, frame):
  del signum, frame
  raise KeyboardInterrupt('SIGTERM')


@contextlib.contextmanager
def _sigterm_as_keyboard_interrupt():
  """Turns SIGTERM into KeyboardInterrupt in the main thread.

  Yields a function that installs the handler again (ray.init replaces it).
  """
  if threading.current_thread() is not threading.main_thread():
    yield lambda: None
    return
  previous = signal.signal(signal.SIGTERM, _sigterm_handler)
  try:
    yield lambda: signal.signal(signal.SIGTERM, _sigterm_handler)
  finally:
    signal.signal(signal.SIGTERM, previous)


def _flag(holder, default):
  if flags.FLAGS.is_parsed():
    return holder.value
  return default


def _given(holder, any_parsed_value: bool) -> bool:
  """Whether to take this flag's value: parsed and (given, or asked for)."""
  if not flags.FLAGS.is_parsed():
    return False
  return any_parsed_value or bool(flags.FLAGS[holder.name].present)


def _check_max_restarts(program: program_lib.Program,
                        max_restarts: Optional[Mapping[str, int]]
                        ) -> Dict[str, int]:
  if not max_restarts:
    return {}
  if not isinstance(max_restarts, Mapping):
    raise ValueError('max_restarts must be a dict {group label: restarts}, '
                     f'e.g. {{"actor": 3}}, got {max_restarts!r}.')
  for label, value in max_restarts.items():
    if label not in program.groups:
      raise ValueError(f'max_restarts names group {label!r}, which is not in '
                       f'program {program.name!r}; its groups are '
                       f'{sorted(program.groups)}.')
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
      raise ValueError(f'max_restarts[{label!r}] must be an int >= 0, got '
                       f'{value!r}.')
  return dict(max_restarts)


def launch(program: program_lib.Program,
           launch_type: Optional[str] = None,
           local_resources: Optional[Mapping[str, Any]] = None,
           terminal: Optional[str] = None,
           *,
           max_restarts: Optional[Mapping[str, int]] = None,
           ray_address: Optional[str] = None,
           logdir: Optional[str] = None,
           termination_notice_secs: Optional[float] = None,
           block: Optional[bool] = None,
           max_concurrency: int = 256) -> LaunchedProgram:
  """Launches `program`.

  Args:
    program: the program graph.
    launch_type: 'test_mt', 'local_mt', 'local_mp' or 'ray'. None reads the
      flags --lp_launch_type, --ray_address, --lp_resources and
      --lp_termination_notice_secs (their defaults if flags are unparsed);
      otherwise those flags only fill arguments left None when they were
      given on the command line.
    local_resources: per group label, a dict with keys num_cpus, num_gpus,
      memory, resources (custom Ray resources) and env (environment variables
      set in the node's process before it is built). Used by local_mp / ray.
    terminal: 'output_to_files' (default: each node's stdout/stderr go to
      `<logdir>/<node>.log`) or 'current_terminal' (Ray forwards them here).
    max_restarts: per group label, how many times a node of that group whose
      process dies or whose code raises is restarted (rebuilt from its
      constructor arguments) before the program fails, e.g.
      `{'actor': 3}`; default 0 for every group. local_mp / ray: Ray's actor
      restarts (calls to a restarting node wait for it); threads: the
      node's thread builds and runs it again.
    ray_address: the cluster for launch_type='ray'.
    logdir: where node logs go; default /tmp/repertory/<program>-<time>.
    termination_notice_secs: how long nodes get to finish once the program
      stops, before they are killed (default 10).
    block: wait until the program stops. Default: False for test_mt, True
      otherwise.
    max_concurrency: concurrent calls per Ray actor (local_mp / ray).

  Returns:
    A `LaunchedProgram` (stopped already if `block`).

  Raises:
    NodeError: (when blocking) a node failed; the message names it and
      carries its traceback.
    KeyboardInterrupt: Ctrl-C or SIGTERM, after every node was stopped.
  """
  if not isinstance(program, program_lib.Program):
    raise TypeError(f'launch() takes a Program, got {program!r}.')
  # With launch_type=None every launch flag is read (its default if flags
  # are unparsed); otherwise only those given explicitly on the command line
  # fill arguments left None (e.g. --ray_address for launch_type='ray').
  from_flags = launch_type is None
  if from_flags:
    launch_type = _flag(_LAUNCH_TYPE, 'local_mt')
  if ray_address is None and _given(_RAY_ADDRESS, from_flags):
    ray_address = _RAY_ADDRESS.value
  if local_resources is None and _given(_RESOURCES, from_flags):
    if _RESOURCES.value:
      local_resources = parse_resources(_RESOURCES.value)
  if termination_notice_secs is None and _given(_NOTICE, from_flags):
    termination_notice_secs = _NOTICE.value
  if launch_type not in LAUNCH_TYPES:
    raise ValueError(f'Unknown launch_type {launch_type!r}; valid launch types '
                     f'are {LAUNCH_TYPES}.')
  if terminal is None:
    terminal = 'output_to_files'
  if terminal not in TERMINALS:
    raise ValueError(f'Unknown terminal {terminal!r}; valid terminals are '
                     f'{TERMINALS}.')
  if termination_notice_secs is None:
    termination_notice_secs = DEFAULT_TERMINATION_NOTICE_SECS
  if termination_notice_secs < 0:
    raise ValueError('termination_notice_secs must be >= 0, got '
                     f'{termination_notice_secs}.')
  resources = _check_resources(program, local_resources)
  restarts = _check_max_restarts(program, max_restarts)
  if block is None:
    block = launch_type != 'test_mt'

  if launch_type in ('test_mt', 'local_mt'):
    from repertory.launch import threads_backend  # pylint: disable=g-import-not-at-top
    backend = threads_backend.ThreadRuntime(program, launch_type,
                                            termination_notice_secs,
                                            max_restarts=restarts)
  else:
    from repertory.launch import ray_backend  # pylint: disable=g-import-not-at-top
    if logdir is None:
      logdir = os.path.join(
          '/tmp/repertory',
          f'{program.name}-{time.strftime("%Y%m%d-%H%M%S")}-'
          f'{program.program_id[:6]}')
    backend = ray_backend.RayLauncher(
        program, launch_type, resources, terminal=terminal,
        ray_address=ray_address, logdir=logdir,
        termination_notice_secs=termination_notice_secs,
        max_concurrency=max_concurrency, max_restarts=restarts)

  launched = LaunchedProgram(backend, program, launch_type, logdir)
  if not block:
    backend.start()
    return launched
  with _sigterm_as_keyboard_interrupt() as reinstall_sigterm_handler:
    try:
      backend.start()
      reinstall_sigterm_handler()
      while not launched.wait(timeout=0.5):
        pass
    except KeyboardInterrupt:
      logging.warning('Interrupted: stopping program %r (notice %.1f s).',
                      program.name, termination_notice_secs)
      backend.request_stop('interrupted (Ctrl-C or SIGTERM)')
      backend.wait_done(termination_notice_secs + 60.0)
      with launched._lock:  # pylint: disable=protected-access
        if not launched._finalized:  # pylint: disable=protected-access
          launched._finalized = True  # pylint: disable=protected-access
          backend.finalize()
      raise
  return launched
