"""local_mp's own Ray instance, and connecting to an existing cluster.

`start()` calls `ray.init` for a new local instance without the Ray
processes a local_mp program has no use for (the autoscaler monitor, the
dashboard's API server, and the log monitor unless nodes print to the
launcher's terminal), with every process listening on 127.0.0.1 only, and
finds the raylet as soon as it registers. Each of these reaches into a
private name of Ray: they live in `launch/process/ray_internals.py`, which
names the Ray version they were written for. Everything else - token
authentication, the session, `ray.shutdown()` ending what was started -
stays `ray.init`'s.

`REPERTORY_FULL_RAY=1` starts every process `ray.init` starts (e.g. to
use Ray's state API or `ray status` on a local_mp program).

`connect()` joins an existing cluster (launch_type='ray', Tune sweeps),
finding its node under 127.0.0.1 or the machine's outward address as the
cluster registered it; `check_cluster()` refuses, before a run writes
anything, a cluster a ray launch would refuse.
"""

import contextlib
import logging as std_logging
import os
import socket
from typing import Any, Mapping, Optional

from absl import logging
import ray

from repertory.launch.api import errors
from repertory.launch.api import resources as resources_lib
from repertory.launch.backends import ray_auth
from repertory.launch.process import ray_internals

# Set to 1 to start every Ray process ray.init starts (e.g. to use Ray's
# state API or `ray status` against a local_mp program).
FULL_ENV = 'REPERTORY_FULL_RAY'
# ray.init attempts when Ray's fixed start-up wait runs out.
START_ATTEMPTS = 3


# Set while a connection check_cluster() made waits for the launch.
_checked_connection = []
# How long connect() waits for a cluster's GCS to answer which nodes it has.
_GCS_ANSWER_S = 10


def _nodes_on_loopback(address: str) -> bool:
  """Whether the cluster whose GCS is at `address` (on this machine) has a
  node registered at 127.0.0.1 (one started on loopback, as
  `testing.loopback_ray_cluster` does), not at the machine's outward
  address (as `ray start` registers it)."""
  host, _, port = address.rpartition(':')
  if not port.isdigit():
    raise errors.LaunchError(
        f'Ray address {address!r} has no port; give <host>:<port>, '
        'ray://<host>:<port> or auto.')
  try:  # Nothing listening is told at once, not after Ray's retries.
    socket.create_connection((host, int(port)), timeout=_GCS_ANSWER_S).close()
    addresses = ray_internals.node_addresses(address, _GCS_ANSWER_S)
  except Exception as e:  # pylint: disable=broad-except
    reason = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise errors.LaunchError(
        f'No Ray cluster answers at {address} ({reason}); start one with '
        '`RAY_AUTH_MODE=token ray start --head --port=<port>`, or pass the '
        'address it prints.') from None
  return '127.0.0.1' in addresses


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
      with ray_internals.loopback_addresses():
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
  # With RAY_AUTH_MODE unset, ray.init of a new instance turns token
  # authentication on itself and logs a warning that tells the user how to
  # turn it off; turned on here as Ray would, the launch says nothing.
  if ray_auth.AUTH_MODE_ENV not in os.environ:
    ray_internals.enable_token_auth()
  for attempt in range(1, START_ATTEMPTS + 1):
    try:
      context = (ray_internals.without_unused_processes(forward_output)
                 if lean else contextlib.nullcontext())
      with (context, ray_internals.node_found_early(),
            ray_internals.loopback_addresses()):
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




def check_cluster_resources(resources: Mapping[str, Mapping[str, Any]],
                             address: Optional[str]) -> None:
  try:
    resources_lib.check_cluster_resources(
        resources, ray.cluster_resources(),
        address or os.environ.get('RAY_ADDRESS') or 'auto')
  except ValueError as e:
    raise errors.LaunchError(str(e)) from None


def check_cluster(ray_address: Optional[str],
                  resources: Mapping[str, Mapping[str, Any]]) -> None:
  """What launch_type='ray' would refuse, refused now (LaunchError, one
  line): no cluster answering at `ray_address`, a cluster without token
  authentication, a custom resource none of its nodes has. Stays connected
  for the launch that follows (which disconnects at its end)."""
  connected = False
  try:
    if not ray.is_initialized():
      try:
        connect(ray_address)
      except errors.LaunchError:
        raise
      except Exception as e:  # pylint: disable=broad-except
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise errors.LaunchError(
            f'No Ray cluster to connect to at '
            f'{ray_address or os.environ.get("RAY_ADDRESS") or "auto"} '
            f'({reason}).') from None
      connected = True
    ray_auth.check_token_auth('ray')
    check_cluster_resources(resources, ray_address)
  except BaseException:
    if connected:
      ray.shutdown()
    raise
  if connected:
    _checked_connection.append(True)


def take_checked_connection() -> bool:
  """Whether this process's connection to Ray is check_cluster()'s (the
  launch that follows then owns it); asked once."""
  taken = bool(_checked_connection)
  _checked_connection.clear()
  return taken
