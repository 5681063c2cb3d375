"""`launch()`: runs a program in threads, in local processes or on Ray."""

import contextlib
import os
import signal
import threading
import time
from typing import Any, Dict, Mapping, Optional, Sequence

from absl import flags
from absl import logging

from repertory.launch.api import compat
from repertory.launch.api import errors
from repertory.launch.api import program as program_lib
from repertory.launch.api import resources as resources_lib

LAUNCH_TYPES = ('test_mt', 'local_mt', 'local_mp', 'test_mp', 'ray')
TERMINALS = ('output_to_files', 'current_terminal')
DEFAULT_TERMINATION_NOTICE_SECS = 10.0

_LAUNCH_TYPE = flags.DEFINE_enum(
    'lp_launch_type', 'local_mt', LAUNCH_TYPES,
    'How to launch a repertory program: test_mt (threads, launch() returns), '
    'local_mt (threads), local_mp (a local Ray instance, one process per node '
    'or colocation), test_mp (local_mp, launch() returns) or ray (an existing '
    'Ray cluster, see --ray_address).')
_RAY_ADDRESS = flags.DEFINE_string(
    'ray_address', None,
    "Address of the Ray cluster for --lp_launch_type=ray (e.g. '127.0.0.1:6379' "
    "from `ray start --head`); default: the cluster this process is connected "
    "to, else 'auto'.")
_RESOURCES = flags.DEFINE_string(
    'lp_resources', None,
    'Resources per group label for local_mp/ray, e.g. '
    '"learner=cpu:1,gpu:1 actor=cpu:1,my_res:1"; cpus:2 or cpus:2-3 pins '
    "the group's processes to those CPU cores.")
_NOTICE = flags.DEFINE_float(
    'lp_termination_notice_secs', DEFAULT_TERMINATION_NOTICE_SECS,
    'Seconds nodes get to finish (e.g. write a final checkpoint) after the '
    'program starts stopping, before they are killed.')


def check_cluster(local_resources: Optional[Mapping[str, Any]] = None,
                  ray_address: Optional[str] = None) -> None:
  """For launch_type='ray', before anything is written: raises
  `LaunchError` in one line if no Ray cluster answers at `ray_address`
  (default `RAY_ADDRESS`, else 'auto'), if it takes callers without token
  authentication, or if a custom resource of `local_resources` is on none of
  its nodes. Leaves this process connected for the launch."""
  from repertory.launch.backends import local_ray  # pylint: disable=g-import-not-at-top
  local_ray.check_cluster(ray_address, {
      label: dict(entry) for label, entry in (local_resources or {}).items()
      if isinstance(entry, Mapping)})


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
    return self.wait(timeout=timeout)

  def wait(self, labels_to_wait_for: Optional[Sequence[str]] = None,
           return_on_first_completed: bool = False,
           timeout: Optional[float] = None) -> bool:
    """Waits until the program has stopped; False if `timeout` s passed.

    Args:
      labels_to_wait_for: as Launchpad: wait only until the nodes of these
        groups finished (a failure of any node still raises); None: until
        the whole program stopped. A number here is taken as `timeout`
        (repertory's earlier signature `wait(timeout)`).
      return_on_first_completed: with labels, return once one of their
        nodes finished.
      timeout: seconds; None waits without limit.

    Raises:
      The exception a failed node raised (its class is also a
      `launch.NodeError`, naming the node), or a `NodeError` if its process
      died.
    """
    if isinstance(labels_to_wait_for, (int, float)):
      timeout, labels_to_wait_for = float(labels_to_wait_for), None
    if isinstance(labels_to_wait_for, str):
      labels_to_wait_for = [labels_to_wait_for]
    if labels_to_wait_for is not None:
      unknown = sorted(set(labels_to_wait_for) - set(self.program.groups))
      if unknown:
        raise ValueError(f'wait() names groups {unknown}, which are not in '
                         f'program {self.program.name!r}; its groups are '
                         f'{sorted(self.program.groups)}.')
      deadline = None if timeout is None else time.monotonic() + timeout
      while not self._backend.labels_done(labels_to_wait_for,
                                          return_on_first_completed):
        if self._backend.wait_done(0.05):
          break
        if self._backend.error is not None:
          break
        if deadline is not None and time.monotonic() > deadline:
          return False
      if self._backend.error is None:
        return True
      timeout = None  # A node failed: wait for the stop, then raise it.
    if not self._backend.wait_done(timeout):
      return False
    self._finalize_once()
    if self._backend.error is not None:
      raise self._backend.error
    return True

  def _finalize_once(self) -> None:
    with self._lock:
      if not self._finalized:
        self._finalized = True
        self._backend.finalize()

  def is_running(self) -> bool:
    return not self._backend.wait_done(0)

  def _cleanup_after_test(self) -> None:
    """`launch(..., test_case=...)`: stops the program when the test ends."""
    try:
      self.stop()
    except Exception:  # pylint: disable=broad-except
      # Raised to the test already if it waited; logged here otherwise.
      logging.exception('Program %r had failed (found stopping it after the '
                        'test).', self.program.name)


class Terminated(SystemExit, KeyboardInterrupt):
  """SIGTERM reached the launcher: caught as a KeyboardInterrupt; uncaught,
  the process exits with status 143 (128 + SIGTERM), as a process ended by
  SIGTERM does."""

  def __init__(self):
    super().__init__(128 + signal.SIGTERM)


def _sigterm_handler(signum, frame):
  del signum, frame
  raise Terminated()


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


def launch(program: program_lib.Program,
           launch_type: Optional[str] = None,
           local_resources: Optional[Mapping[str, Any]] = None,
           terminal: Optional[str] = None,
           *,
           test_case: Any = None,
           xm_resources: Any = None,
           serialize_py_nodes: Optional[bool] = None,
           max_restarts: Optional[Mapping[str, int]] = None,
           ray_address: Optional[str] = None,
           logdir: Optional[str] = None,
           termination_notice_secs: Optional[float] = None,
           block: Optional[bool] = None,
           max_concurrency: int = 256) -> LaunchedProgram:
  """Launches `program`.

  Args:
    program: the program graph (a list of programs, as Launchpad takes:
      only the first is launched).
    launch_type: 'test_mt', 'local_mt', 'local_mp', 'test_mp' or 'ray' (or a
      `LaunchType`). test_mt and test_mp return at once. None reads the
      flags --lp_launch_type, --ray_address, --lp_resources and
      --lp_termination_notice_secs (their defaults if flags are unparsed);
      otherwise those flags only fill arguments left None when they were
      given on the command line.
    local_resources: per group label, a dict with keys num_cpus, num_gpus,
      memory, resources (custom Ray resources), env (environment variables
      set in the node's process before it is built) and cpus (CPU core ids
      the group's processes are pinned to), or a
      `launch.PythonProcess(env=...)`. Used by local_mp, test_mp and ray.
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
    test_case: a `unittest.TestCase`: the program is stopped when the test
      ends (`addCleanup`), as Launchpad does.
    xm_resources: Launchpad's XManager settings; must be None here (there is
      no XManager launch).
    serialize_py_nodes: Launchpad's; accepted and not used (nodes are
      pickled for local_mp / ray whatever its value).

  Returns:
    A `LaunchedProgram` (stopped already if `block`).

  Raises:
    NodeError: (when blocking) a node failed; the message names it and
      carries its traceback.
    KeyboardInterrupt: Ctrl-C or SIGTERM, after every node was stopped.
  """
  program = _one_program(program)
  if xm_resources is not None:
    raise ValueError('xm_resources is for Launchpad\'s XManager launch, which '
                     'repertory does not have; use local_resources (Ray '
                     'resources per group) and --lp_launch_type=ray.')
  del serialize_py_nodes
  settings = _settings(program, launch_type, local_resources, terminal,
                       max_restarts, ray_address, termination_notice_secs)
  if block is None:
    block = settings['launch_type'] not in ('test_mt', 'test_mp')
  compat.bind_addresses(program.all_nodes())
  backend, logdir = _backend(program, settings, logdir, max_concurrency)
  launched = LaunchedProgram(backend, program, settings['launch_type'], logdir)
  if test_case is not None:
    test_case.addCleanup(launched._cleanup_after_test)  # pylint: disable=protected-access
  if not block:
    backend.start()
    return launched
  _run_until_stopped(launched, backend, settings['termination_notice_secs'])
  return launched


def _one_program(program: Any) -> program_lib.Program:
  """The program of `launch(program)` (the first of a list, as Launchpad)."""
  if isinstance(program, (list, tuple)) and program:
    if len(program) > 1:
      logging.warning('launch() was given %d programs; launching only the '
                      'first, %r (as Launchpad does).', len(program),
                      getattr(program[0], 'name', program[0]))
    program = program[0]
  if not isinstance(program, program_lib.Program):
    raise TypeError(f'launch() takes a Program, got {program!r}.')
  return program


def _settings(program: program_lib.Program, launch_type: Any,
              local_resources: Optional[Mapping[str, Any]],
              terminal: Optional[str],
              max_restarts: Optional[Mapping[str, int]],
              ray_address: Optional[str],
              termination_notice_secs: Optional[float]) -> Dict[str, Any]:
  """`launch()`'s arguments completed from the flags and checked."""
  if isinstance(launch_type, compat.LaunchType):
    launch_type = launch_type.value
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
      local_resources = resources_lib.parse_resources(_RESOURCES.value)
  if termination_notice_secs is None and _given(_NOTICE, from_flags):
    termination_notice_secs = _NOTICE.value
  if launch_type not in LAUNCH_TYPES:
    raise ValueError(f'Unknown launch_type {launch_type!r}; valid launch types '
                     f'are {LAUNCH_TYPES}.')
  terminal = 'output_to_files' if terminal is None else terminal
  if terminal not in TERMINALS:
    raise ValueError(f'Unknown terminal {terminal!r}; valid terminals are '
                     f'{TERMINALS}.')
  if termination_notice_secs is None:
    termination_notice_secs = DEFAULT_TERMINATION_NOTICE_SECS
  if termination_notice_secs < 0:
    raise ValueError('termination_notice_secs must be >= 0, got '
                     f'{termination_notice_secs}.')
  return {
      'launch_type': launch_type, 'terminal': terminal,
      'ray_address': ray_address,
      'termination_notice_secs': termination_notice_secs,
      'resources': resources_lib.check_local_resources(
          program, local_resources, launch_type),
      'max_restarts': resources_lib.check_max_restarts(program, max_restarts),
  }


def _backend(program: program_lib.Program, settings: Mapping[str, Any],
             logdir: Optional[str], max_concurrency: int):
  """The backend that runs `program`, and its log folder (None for
  threads)."""
  launch_type = settings['launch_type']
  if launch_type in ('test_mt', 'local_mt'):
    from repertory.launch.backends import threads_backend  # pylint: disable=g-import-not-at-top
    return threads_backend.ThreadRuntime(
        program, launch_type, settings['termination_notice_secs'],
        max_restarts=settings['max_restarts']), logdir
  from repertory.launch.backends import ray_backend  # pylint: disable=g-import-not-at-top
  if logdir is None:
    logdir = os.path.join(
        '/tmp/repertory',
        f'{program.name}-{time.strftime("%Y%m%d-%H%M%S")}-'
        f'{program.program_id[:6]}')
  return ray_backend.RayLauncher(
      program, launch_type, settings['resources'],
      terminal=settings['terminal'], ray_address=settings['ray_address'],
      logdir=logdir,
      termination_notice_secs=settings['termination_notice_secs'],
      max_concurrency=max_concurrency,
      max_restarts=settings['max_restarts']), logdir


def _run_until_stopped(launched: LaunchedProgram, backend,
                       notice_secs: float) -> None:
  """Starts the program and waits until it stops; on Ctrl-C or SIGTERM,
  stops it (its nodes get `notice_secs`) and raises KeyboardInterrupt."""
  with _sigterm_as_keyboard_interrupt() as reinstall_sigterm_handler:
    try:
      backend.start()
      reinstall_sigterm_handler()
      while not launched.wait(timeout=0.5):
        pass
    except KeyboardInterrupt:
      logging.warning('Interrupted: stopping program %r (notice %.1f s).',
                      launched.program.name, notice_secs)
      backend.request_stop('interrupted (Ctrl-C or SIGTERM)')
      backend.wait_done(notice_secs + 60.0)
      launched._finalize_once()  # pylint: disable=protected-access
      raise
