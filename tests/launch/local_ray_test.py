"""local_mp's Ray instance runs only the Ray processes a program uses.

Each test launches a real local_mp program (test_mp: launch() returns while
it runs), lists the Ray processes under this test process, lets the program
finish, and checks that they are gone.
"""

import contextlib
import os
import subprocess
import sys
import time
from typing import Dict, Iterator, List

import cloudpickle
import psutil
import pytest
import ray

from repertory import launch
from repertory.launch.backends import local_ray
from repertory.launch.backends import ray_auth
from repertory.launch.process import ray_internals

cloudpickle.register_pickle_by_value(sys.modules[__name__])

_MARKER = 'lean-ray-marker-7d1f'
# What every local instance runs, and what local_mp leaves out.
_ALWAYS = {'gcs_server', 'raylet', 'dashboard_agent', 'runtime_env_agent'}
_UNUSED = {'autoscaler_monitor', 'api_server'}


def _kind(process: psutil.Process) -> str:
  try:
    argv = process.cmdline()
  except psutil.Error:
    return 'gone'
  words = ' '.join(argv).split()
  if not words:
    return 'other'
  # Ray's agents rename themselves (setproctitle): 'ray::DashboardAgent'.
  if words[0] == 'ray::DashboardAgent':
    return 'dashboard_agent'
  if words[0] == 'ray::RuntimeEnvAgent':
    return 'runtime_env_agent'
  names = [os.path.basename(w) for w in words[:3]]
  for name, kind in (('gcs_server', 'gcs_server'), ('raylet', 'raylet'),
                     ('log_monitor.py', 'log_monitor'),
                     ('monitor.py', 'autoscaler_monitor'),
                     ('dashboard.py', 'api_server')):
    if name in names:
      return kind
  return 'other'


def _ray_processes() -> Dict[str, List[psutil.Process]]:
  found: Dict[str, List[psutil.Process]] = {}
  for process in psutil.Process().children(recursive=True):
    found.setdefault(_kind(process), []).append(process)
  return found


def _describe(processes: Dict[str, List[psutil.Process]]) -> str:
  lines = []
  for kind, ps in processes.items():
    for p in ps:
      try:
        lines.append(f'{kind}: {" ".join(p.cmdline())[:120]}')
      except psutil.Error:
        lines.append(f'{kind}: gone')
  return '\n'.join(lines)


def _print_until(stop_path: str) -> None:
  """Prints the marker (to the node's stdout) until `stop_path` exists."""
  deadline = time.monotonic() + 120
  while not os.path.exists(stop_path) and time.monotonic() < deadline:
    print(_MARKER, flush=True)
    time.sleep(0.2)


@contextlib.contextmanager
def _running(tmp_path, **kwargs) -> Iterator[launch.LaunchedProgram]:
  """A program of one node that prints until told to stop; stopped at the
  end of the block whatever happens in it."""
  program = launch.Program('lean')
  program.add_node(launch.PyNode(_print_until, str(tmp_path / 'stop')),
                   label='printer')
  launched = launch.launch(program, launch_type='test_mp',
                           logdir=str(tmp_path / 'logs'),
                           termination_notice_secs=5, **kwargs)
  try:
    yield launched
  finally:
    (tmp_path / 'stop').write_text('stop')
    launched.stop(timeout=60)


def _finish(launched, tmp_path) -> List[psutil.Process]:
  """Lets the node return and the program end; returns the Ray processes
  that were running while it ran."""
  running = [p for kind, ps in _ray_processes().items() if kind != 'other'
             for p in ps]
  (tmp_path / 'stop').write_text('stop')
  assert launched.wait(timeout=60)
  assert launched.error is None
  assert not ray.is_initialized()
  return running


def _assert_gone(processes: List[psutil.Process]) -> None:
  _, alive = psutil.wait_procs(processes, timeout=30)
  assert not alive, [(p.pid, _kind(p)) for p in alive]


@pytest.fixture(autouse=True)
def _no_full_ray(monkeypatch):
  monkeypatch.delenv(local_ray.FULL_ENV, raising=False)


def test_node_logs_to_files_need_neither_monitor_nor_api_server(tmp_path):
  with _running(tmp_path) as launched:
    processes = _ray_processes()
    kinds = set(processes)
    assert _ALWAYS <= kinds, _describe(processes)
    assert not kinds & (_UNUSED | {'log_monitor'}), _describe(processes)
    # The node runs and writes its own log file.
    log = tmp_path / 'logs' / 'printer_0.log'
    deadline = time.monotonic() + 60
    while _MARKER not in (log.read_text() if log.exists() else ''):
      assert time.monotonic() < deadline, 'the node never wrote its log'
      time.sleep(0.1)
    _assert_gone(_finish(launched, tmp_path))


_QUIET_LAUNCH = """
import os
from repertory import launch
program = launch.Program('quiet')
program.add_node(launch.PyNode(print, 'node ran'), label='printer')
launched = launch.launch(program, launch_type='test_mp',
                         logdir=os.environ['LOGDIR'])
assert launched.wait(timeout=60) and launched.error is None
print('auth mode', os.environ['RAY_AUTH_MODE'])
"""


def test_a_launch_turns_token_auth_on_without_a_warning(tmp_path):
  """Ray's own start would log that it turned token authentication on and
  how to turn it off; the launch turns it on before, and says nothing."""
  env = {k: v for k, v in os.environ.items()
         if k != ray_auth.AUTH_MODE_ENV}
  env['LOGDIR'] = str(tmp_path / 'logs')
  process = subprocess.run([sys.executable, '-c', _QUIET_LAUNCH], env=env,
                           capture_output=True, text=True, timeout=180,
                           check=False)
  assert process.returncode == 0, process.stderr
  # The launch checked that the instance refuses callers without the token.
  assert 'auth mode token' in process.stdout
  assert 'Token authentication' not in process.stderr, process.stderr


def test_the_current_terminal_keeps_the_log_monitor(tmp_path, capfd):
  with _running(tmp_path, terminal='current_terminal') as launched:
    processes = _ray_processes()
    kinds = set(processes)
    assert _ALWAYS | {'log_monitor'} <= kinds, _describe(processes)
    assert not kinds & _UNUSED, _describe(processes)
    # Ray forwards the node's stdout to this process's.
    seen = ''
    deadline = time.monotonic() + 60
    while _MARKER not in seen:
      assert time.monotonic() < deadline, (
          f'the node output never reached the driver: {seen[-500:]!r}')
      time.sleep(0.2)
      seen += capfd.readouterr().out
    _assert_gone(_finish(launched, tmp_path))


def test_full_ray_starts_every_process(tmp_path, monkeypatch):
  monkeypatch.setenv(local_ray.FULL_ENV, '1')
  with _running(tmp_path) as launched:
    processes = _ray_processes()
    assert _ALWAYS | _UNUSED | {'log_monitor'} <= set(processes), (
        _describe(processes))
    _assert_gone(_finish(launched, tmp_path))


def test_ray_init_is_left_as_it_was():
  node_class = ray._private.node.Node  # pylint: disable=protected-access
  before = (node_class.__init__, node_class.start_api_server)
  with ray_internals.without_unused_processes(False):
    assert node_class.start_api_server is not before[1]
  assert (node_class.__init__, node_class.start_api_server) == before


def test_get_node_polls_the_node_table_then_asks_ray(tmp_path):
  services = ray._private.services  # pylint: disable=protected-access
  original = services.get_node
  with _running(tmp_path) as launched:
    context = ray.get_runtime_context()
    gcs_address, node_id = context.gcs_address, context.get_node_id()
    with ray_internals.node_found_early():
      assert services.get_node is not original
      info = services.get_node(gcs_address, node_id)
    assert services.get_node is original
    assert info['node_manager_port'] > 0, info
    _assert_gone(_finish(launched, tmp_path))


@pytest.mark.parametrize('address', ['127.0.0.1', 'localhost:'])
def test_connect_refuses_a_loopback_address_without_a_port(address):
  with pytest.raises(launch.LaunchError,
                     match=f"Ray address '{address}' has no port"):
    local_ray.connect(address)
  assert not ray.is_initialized()
