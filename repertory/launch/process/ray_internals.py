"""Every use of a private name of Ray 2.60.0, in one place.

Written for `ray==2.60.0` (`PINNED`); `PRIVATE_NAMES` lists each private name
used here, and tests/launch/private_apis_test.py fails when the installed
Ray is another version or one of the names is gone. Each function falls back
to Ray's public behaviour where a name is missing, so a different Ray runs
(slower to start, or without the loopback pinning), and the test says so.

- `without_unused_processes`: `ray.init` of a new local instance starts the
  autoscaler monitor (`autoscaler/_private/monitor.py`), the dashboard's API
  server (`dashboard/dashboard.py`; with `include_dashboard=False` a minimal
  one that serves usage stats, which `ray.init` waits for) and the log
  monitor, none of which a local_mp program uses; `ray.init` has no argument
  for them (`ray start` has `--no-monitor` and `--include-log-monitor`).
  During the block, the head node's `RayParams` are told `no_monitor=True`
  and `include_log_monitor=<forward_output>` (the two names `ray start`
  sets) and `Node.start_api_server` is skipped.
- `node_found_early`: `ray.init` waits for the raylet to register through
  `services.get_node`, which after a first miss waits long before it asks
  again; during the block it first polls the GCS's node table.
- `loopback_addresses`: Ray rewrites a loopback node address to the
  machine's outward one (`services.resolve_ip_for_localhost`), so Ray's gRPC
  servers would bind every interface; during the block
  `ray_constants.ENABLE_RAY_CLUSTER` is off (as Ray has it on macOS and
  Windows), which keeps 127.0.0.1.
- `node_addresses`: the addresses a cluster's nodes registered, from its GCS
  (`ray._raylet.GcsClient`), to tell a cluster started on loopback from one
  `ray start` registered at the outward address.
- `node_table`: the same table with each node's liveness and resources, for
  `repertory.cluster`'s hosts.
- `enable_token_auth`: token authentication for a cluster that
  `ray.cluster_utils.Cluster` starts (it does not turn it on itself), and
  for local_mp's instance (`ray.init` would turn it on, with a warning that
  tells how to turn it off).
"""

import contextlib
import importlib
import time
from typing import Any, Dict, Iterator, List

PINNED = ('ray', '2.60.0')
# (module, attribute path) of every private name used here.
PRIVATE_NAMES = (
    ('ray._private.node', 'Node.__init__'),
    ('ray._private.node', 'Node.start_api_server'),
    ('ray._private.parameter', 'RayParams.update'),
    ('ray._private.services', 'get_node'),
    ('ray._private.services', '_get_gcs_client_options'),
    ('ray._private.state', 'GlobalState._initialize_global_state'),
    ('ray._private.state', 'GlobalState.node_table'),
    ('ray._private.ray_constants', 'ENABLE_RAY_CLUSTER'),
    ('ray._raylet', 'GcsClient'),
    # GcsClient forwards its calls to InnerGcsClient.
    ('ray._raylet', 'InnerGcsClient.get_all_node_info'),
    ('ray._private.authentication.authentication_token_setup',
     '_enable_token_auth'),
    ('ray._private.authentication.authentication_token_setup',
     'ensure_token_if_auth_enabled'),
)
# RayParams fields set by `without_unused_processes`.
RAY_PARAMS_FIELDS = ('no_monitor', 'include_log_monitor')

# How often node_found_early() looks for the raylet in Ray's node table.
_NODE_POLL_S = 0.02
# After this, the look is left to Ray's own wait.
_NODE_WAIT_S = 30.0


def _module(name: str):
  try:
    return importlib.import_module(name)
  except ImportError:
    return None


@contextlib.contextmanager
def without_unused_processes(forward_output: bool) -> Iterator[None]:
  """During the block, a head node started by ray.init leaves out the
  autoscaler monitor, the API server and (unless `forward_output`) the log
  monitor."""
  node_class = getattr(_module('ray._private.node'), 'Node', None)
  if node_class is None or not hasattr(node_class, 'start_api_server'):
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


@contextlib.contextmanager
def node_found_early() -> Iterator[None]:
  """During the block, Ray's `services.get_node(gcs_address, node_id)`
  first polls the GCS's node table until the node is there."""
  services = _module('ray._private.services')
  state = _module('ray._private.state')
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

  `ray.init(_node_ip_address='127.0.0.1')` of a new instance then starts the
  GCS and the raylet on loopback, and `ray.init` of a cluster bound to
  127.0.0.1 reaches it. Only that flag is touched, only during the block;
  the processes started then keep the address they were given.
  """
  ray_constants = _module('ray._private.ray_constants')
  if not hasattr(ray_constants, 'ENABLE_RAY_CLUSTER'):
    yield
    return
  previous = ray_constants.ENABLE_RAY_CLUSTER
  ray_constants.ENABLE_RAY_CLUSTER = False
  try:
    yield
  finally:
    ray_constants.ENABLE_RAY_CLUSTER = previous


def node_addresses(gcs_address: str, timeout: float) -> List[str]:
  """The address each node of the cluster whose GCS is at `gcs_address`
  registered; raises what Ray's GCS client raises."""
  from ray._raylet import GcsClient  # pylint: disable=g-import-not-at-top
  nodes = GcsClient(address=gcs_address).get_all_node_info(
      timeout=timeout).values()
  return [n.node_manager_address for n in nodes]


def node_table(gcs_address: str, timeout: float) -> List[Dict[str, Any]]:
  """Each node of the cluster whose GCS is at `gcs_address`: its `ip`,
  whether it is `alive`, and its `resources` (totals)."""
  from ray._raylet import GcsClient  # pylint: disable=g-import-not-at-top
  nodes = GcsClient(address=gcs_address).get_all_node_info(
      timeout=timeout).values()
  return [{'ip': n.node_manager_address, 'alive': n.state == 0,
           'resources': dict(n.resources_total)} for n in nodes]


def enable_token_auth() -> None:
  """Turns Ray's token authentication on for clusters this process starts
  (and the processes they start), creating a token if there is none."""
  from ray._private.authentication import authentication_token_setup as auth  # pylint: disable=g-import-not-at-top
  auth._enable_token_auth()  # pylint: disable=protected-access
  auth.ensure_token_if_auth_enabled(None, create_token_if_missing=True)
