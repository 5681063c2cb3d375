"""Helpers the tests of agents and components share (Acme's `testing` module):
a real Reverb server, waiting for a condition, and a program launched in
test_mt with its learner stepped by hand.

    with testing.reverb_server(tables) as client:
      ...
      testing.wait_until(lambda: table_size(client) == 12, 'the 12 unrolls')
"""

import contextlib
import importlib.util
import signal
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

from repertory import launch


def wait_until(predicate: Callable[[], Any], what: str,
               timeout: float = 120.0, interval: float = 0.05) -> Any:
  """Polls `predicate()` until it is truthy and returns its value; fails
  with `what` (what it waited for) after `timeout` seconds."""
  deadline = time.monotonic() + timeout
  while True:
    value = predicate()
    if value:
      return value
    if time.monotonic() > deadline:
      raise AssertionError(f'Timed out after {timeout:.0f} s waiting for '
                           f'{what}.')
    time.sleep(interval)


def like_a_shell() -> None:
  """A `preexec_fn` that starts a child with SIGINT and SIGTERM unblocked
  and SIGINT at its default, as a terminal would: a child inherits its
  parent's signal mask and ignored signals, and a pytest worker's can be
  changed by what ran in it before (a process that ignores SIGINT at start
  never turns Ctrl-C into KeyboardInterrupt)."""
  signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def import_script(path: str, module_name: str) -> Any:
  """Imports the script at `path` as the module `module_name` (once: a
  script that defines absl flags can be imported only once per process)."""
  if module_name not in sys.modules:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
  return sys.modules[module_name]


@contextlib.contextmanager
def loopback_ray_cluster(num_cpus: int, **head_node_args: Any
                         ) -> Iterator[Any]:
  """A real Ray cluster on 127.0.0.1 (`ray.cluster_utils.Cluster`) with
  Ray's token authentication on, as `--lp_launch_type=ray` requires
  (cluster_utils does not turn it on; the environment it sets reaches the
  program's processes). Yields the cluster; shuts it and any connection of
  this process down on exit."""
  import ray  # pylint: disable=g-import-not-at-top
  from ray import cluster_utils  # pylint: disable=g-import-not-at-top
  from repertory.launch.process import ray_internals  # pylint: disable=g-import-not-at-top
  ray_internals.enable_token_auth()
  cluster = cluster_utils.Cluster(
      initialize_head=True,
      head_node_args={'num_cpus': num_cpus, 'node_ip_address': '127.0.0.1',
                      'include_dashboard': False, **head_node_args})
  try:
    yield cluster
  finally:
    if ray.is_initialized():
      ray.shutdown()
    cluster.shutdown()


@contextlib.contextmanager
def reverb_server(tables: Sequence[Any]) -> Iterator[Any]:
  """A real `reverb.Server` with `tables` on a free loopback port; yields a
  `reverb.Client` of it and stops the server on exit."""
  import reverb  # pylint: disable=g-import-not-at-top
  server = reverb.Server(list(tables))
  try:
    yield reverb.Client(f'localhost:{server.port}')
  finally:
    server.stop()


def table_size(client: Any, table: str) -> int:
  """Items in `table` now."""
  return client.server_info()[table].current_size


def read_queue(client: Any, table: str) -> List[Any]:
  """Every item of a queue (FIFO) table, in insertion order, as numpy nests
  of its signature (the table is emptied)."""
  size = table_size(client, table)
  if size == 0:
    return []
  return [s.data for s in client.sample(
      table, size, emit_timesteps=False, unpack_as_table_signature=True)]


@contextlib.contextmanager
def launched(program: launch.Program, launch_type: str = 'test_mt',
             stop_timeout: float = 60.0) -> Iterator[Any]:
  """Launches `program` (not blocking) and stops it on exit."""
  running = launch.launch(program, launch_type=launch_type,
                          termination_notice_secs=5)
  try:
    yield running
  finally:
    running.stop(timeout=stop_timeout)


def step_program_by_hand(program: launch.Program, learner_node: Any,
                         num_steps: int = 5, variable: str = 'policy',
                         timeout: float = 240.0
                         ) -> Tuple[List[int], Dict[str, float]]:
  """Launches `program` in test_mt with the learner's `run()` disabled,
  calls its `step()` until it made `num_steps` updates, and returns (the
  version after each, the counter's counts once they show those steps)."""
  learner_node.disable_run()
  with launched(program):
    learner = learner_node.create_handle().dereference()
    counter = program.groups['counter'][0].create_handle().dereference()
    versions = []
    deadline = time.monotonic() + timeout
    while len(versions) < num_steps:
      if learner.step() is not None:
        versions.append(learner.get_variables([variable]).version)
      assert time.monotonic() < deadline, f'{len(versions)} learner steps'
    learner.flush_counts()
    counts = wait_until(
        lambda: (lambda c: c if c.get('learner_steps', 0) >= num_steps and
                 c.get('actor_steps', 0) > 0 else None)(counter.get_counts()),
        f'{num_steps} learner steps and some actor steps in the counter',
        timeout=max(deadline - time.monotonic(), 1.0), interval=0.2)
    return versions, counts
