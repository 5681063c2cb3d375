"""local_mp's own Ray instance, without the Ray processes it has no use for.

`ray.init()` of a new local instance (Ray 2.60) starts the GCS and the
raylet, which starts and fate-shares the dashboard agent and the
runtime-env agent (it refuses to run without them), and three more Python
processes that a local_mp program does not use:

- the autoscaler monitor (`autoscaler/_private/monitor.py`): one machine,
  nothing to scale;
- the dashboard's API server (`dashboard/dashboard.py`; with
  `include_dashboard=False` a minimal one that serves usage stats only, and
  `ray.init` waits for it to register);
- the log monitor, which tails the workers' stdout/stderr files and
  publishes them to the driver (`log_to_driver`). A program whose nodes
  print to the launcher's terminal (`terminal='current_terminal'`) keeps
  it; with 'output_to_files' each node writes its own log file.

`ray.init` has no argument for any of them (`ray start` has
`--no-monitor` and `--include-log-monitor=false`, and always starts the API
server too). `start()` calls `ray.init` with the head node's `RayParams`
told `no_monitor=True` and `include_log_monitor=<forward_output>`, and with
`Node.start_api_server` skipped, for the duration of that call only (the
same two private names `ray start` sets, and one method); everything else -
token authentication, the session, `ray.shutdown()` ending what was
started - stays `ray.init`'s. On a Ray without these names, `start()` is
plain `ray.init`.

`REPERTORY_FULL_RAY=1` starts every process `ray.init` starts (e.g. to
use Ray's state API or `ray status` on a local_mp program).

Every process of the instance listens on 127.0.0.1 only: `start()` keeps
Ray from replacing the loopback node address with the machine's outward
one (`loopback_addresses`), which would bind Ray's gRPC servers to every
interface.

`ray.init` then waits for the raylet to register with the GCS through
`services.get_node`, which after a first miss waits long before it asks
again (BENCHMARKS.md); `start()` first watches Ray's node table every
`_NODE_POLL_S`, so that the call finds the node at once (lean or full
start alike).

`connect()` joins an existing cluster (launch_type='ray', Tune sweeps),
finding its node under 127.0.0.1 or the machine's outward address as the
cluster registered it.
"""

import contextlib
import logging as std_logging
import os
import socket
import time
from typing import Any, Iterator, Mapping, Optional

from absl import logging
import ray

from repertory.launch.api import errors
from repertory.launch.backends import ray_auth

# Set to 1 to start every Ray process ray.init starts (e.g. to use Ray's
# state API or `ray status` against a local_mp program).
FULL_ENV = 'REPERTORY_FULL_RAY'
# ray.init attempts when Ray's fixed start-up wait runs out.
START_ATTEMPTS = 3


@contextlib.contextmanager
def _without_unused_processes(forward_output: bool) -> Iterator[None]:
  """During the block, a head node started by ray.init leaves out the
  autoscaler monitor, the API server and (unless `forward_output`) the log
  monitor."""
  try:
    from ray._private import node as node_lib  # pylint: disable=g-import-not-at-top
  except ImportError:
    node_lib = None
  node_class = getattr(node_lib, 'Node', None)
  if (node_class is None or
      not hasattr(node_class, 'start_api_server')):
    yield
    return
  original_init = node_class.__init__
  original_api_server = node_class.start_api_server

  def init(self, ray_params, *args, **kwargs):
    if kwargs.get('ray_init_cluster') and hasattr(ray_params, 'update'):
      ray_params.update(no_monitor=True,
                        include_log_monitor=bool(forward_output))
    original_init(self, ray_params, *args, **kwargs)

  def start_api_server(self, **unused_kwargs):
    del self

  node_class.__init__ = init
  node_class.start_api_server = start_api_server
  try:
    yield
  finally:
    node_class.__init__ = original_init
    node_class.start_api_server = original_api_server


# How often start() looks for the raylet in Ray's node table.
_NODE_POLL_S = 0.02
# After this, the look is left to Ray's own wait.
_NODE_WAIT_S = 30.0


@contextlib.contextmanager
def _node_found_early() -> Iterator[None]:
  """During the block, Ray's `services.get_node(gcs_address, node_id)`
  first polls the GCS's node table until the node is there."""
  try:
    from ray._private import services  # pylint: disable=g-import-not-at-top
    from ray._private import state  # pylint: disable=g-import-not-at-top
  except ImportError:
    services = state = None
  if (not hasattr(services, 'get_node') or
      not hasattr(services, '_get_gcs_client_options') or
      not hasattr(state, 'GlobalState')):
    yield
    return
  original_get_node = services.get_node

  def get_node(gcs_address, node_id):
    try:
      table = state.GlobalState()
      table._initialize_global_state(  # pylint: disable=protected-access
          services._get_gcs_client_options(gcs_address))  # pylint: disable=protected-access
      deadline = time.monotonic() + _NODE_WAIT_S
      while time.monotonic() < deadline:
        if any(n.get('NodeID') == node_id for n in table.node_table()):
          break
        time.sleep(_NODE_POLL_S)
    except Exception:  # pylint: disable=broad-except
      pass  # Ray's own call below waits (or raises) as it would.
    return original_get_node(gcs_address, node_id)

  services.get_node = get_node
  try:
    yield
  finally:
    services.get_node = original_get_node


@contextlib.contextmanager
def loopback_addresses() -> Iterator[None]:
  """During the block, Ray takes 127.0.0.1 for this machine's address.

  Ray 2.x rewrites a loopback address to the machine's outward IP
  (`services.resolve_ip_for_localhost`): `ray.init(_node_ip_address=
  '127.0.0.1')` of a new instance would start the GCS and the raylet with
  that IP, and Ray's gRPC servers bind every interface unless the node's
  address is 127.0.0.1; `ray.init` of a cluster bound to 127.0.0.1 would
  not reach it. With `ENABLE_RAY_CLUSTER` off (what Ray does on macOS and
  Windows) it keeps 127.0.0.1. Only that flag is touched, only during the
  block; the processes started then keep the address they were given.
  """
  from ray._private import ray_constants  # pylint: disable=g-import-not-at-top
  if not hasattr(ray_constants, 'ENABLE_RAY_CLUSTER'):
    yield
    return
  previous = ray_constants.ENABLE_RAY_CLUSTER
  ray_constants.ENABLE_RAY_CLUSTER = False
  try:
    yield
  finally:
    ray_constants.ENABLE_RAY_CLUSTER = previous


# How long connect() waits for a cluster's GCS to answer which nodes it has.
_GCS_ANSWER_S = 10


def _nodes_on_loopback(address: str) -> bool:
  """Whether the cluster whose GCS is at `address` (on this machine) has a
  node registered at 127.0.0.1 (one started on loopback, as
  `testing.loopback_ray_cluster` does), not at the machine's outward
  address (as `ray start` registers it)."""
  from ray._raylet import GcsClient  # pylint: disable=g-import-not-at-top
  host, _, port = address.rpartition(':')
  if not port.isdigit():
    raise errors.LaunchError(
        f'Ray address {address!r} has no port; give <host>:<port>, '
        'ray://<host>:<port> or auto.')
  try:  # Nothing listening is told at once, not after Ray's retries.
    socket.create_connection((host, int(port)), timeout=_GCS_ANSWER_S).close()
    nodes = GcsClient(address=address).get_all_node_info(
        timeout=_GCS_ANSWER_S).values()
  except Exception as e:  # pylint: disable=broad-except
    reason = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise errors.LaunchError(
        f'No Ray cluster answers at {address} ({reason}); start one with '
        '`RAY_AUTH_MODE=token ray start --head --port=<port>`, or pass the '
        'address it prints.') from None
  return any(n.node_manager_address == '127.0.0.1' for n in nodes)


def connect(address: Optional[str], log_to_driver: bool = True) -> None:
  """Connects this process to the existing Ray cluster at `address`
  ('<host>:<port>', 'ray://...' or 'auto'; when None, `RAY_ADDRESS`, else
  'auto').

  A cluster's node is found by the address it registered: for a host of
  127.0.0.1 or localhost, Ray would look for the machine's outward address,
  which a cluster started on loopback does not have, and one that `ray
  start` started (registered at the outward address) is not found under
  127.0.0.1; the GCS is asked which it is. Raises LaunchError, in one line,
  if no cluster answers there.
  """
  address = address or os.environ.get('RAY_ADDRESS') or 'auto'
  host = address.split('://')[-1].rsplit(':', 1)[0]
  if '://' not in address and host in ('127.0.0.1', 'localhost'):
    if _nodes_on_loopback(address):
      with loopback_addresses():
        ray.init(address=address, _node_ip_address='127.0.0.1',
                 logging_level=std_logging.WARNING,
                 log_to_driver=log_to_driver)
      return
  ray.init(address=address, logging_level=std_logging.WARNING,
           log_to_driver=log_to_driver)


def start(system_config: Mapping[str, Any], forward_output: bool) -> None:
  """Starts a new local Ray instance listening on loopback and connects.

  Args:
    system_config: Ray's `_system_config` for the instance.
    forward_output: whether workers' stdout/stderr reach this process's
      terminal (keeps Ray's log monitor).
  """
  lean = os.environ.get(FULL_ENV, '') in ('', '0')
  ray_auth.private_token_file()
  for attempt in range(1, START_ATTEMPTS + 1):
    try:
      context = (_without_unused_processes(forward_output) if lean
                 else contextlib.nullcontext())
      with context, _node_found_early(), loopback_addresses():
        ray.init(address='local', _node_ip_address='127.0.0.1',
                 include_dashboard=False, logging_level=std_logging.WARNING,
                 log_to_driver=True, configure_logging=True,
                 _system_config=dict(system_config))
      return
    except Exception as e:  # pylint: disable=broad-except
      ray.shutdown()  # ends whatever a failed start left running
      # Ray waits a fixed 30 s for its raylet; a busy machine misses it.
      if ('timed out during startup' not in str(e)
          or attempt == START_ATTEMPTS):
        raise
      logging.warning('Ray did not start in time (attempt %d of %d, a '
                      'busy machine?); starting it again.', attempt,
                      START_ATTEMPTS)
