"""Whether the Ray instance a program runs on requires Ray's token.

Ray's GCS, raylets and workers listen on all interfaces (Ray 2.60 has no
option to bind them to loopback) and run any code a caller sends them. With
token authentication (`RAY_AUTH_MODE=token`) they refuse a caller without
the cluster's token; `ray.init()` of a new local instance turns it on, but
`ray start --head` does not unless a token exists, and a driver given an
address never turns it on. `check_token_auth` asks the GCS directly, with a
call that carries no token, and refuses to launch on an instance that
answers it (see docs/security.md for the cluster recipe).
"""

import os
from typing import Optional

from absl import logging

from repertory.launch import errors

# Set to 1 to launch on a Ray instance without token auth all the same.
ALLOW_ENV = 'REPERTORY_ALLOW_UNAUTHENTICATED_RAY'

_FIX = (
    'Anyone who can reach its ports can run code in every node of the '
    'program. Start the cluster with token authentication: run '
    '`ray get-auth-token --generate` once, copy ~/.ray/auth_token to every '
    'machine (chmod 600), start every node with '
    '`RAY_AUTH_MODE=token ray start ...` and run the driver with '
    'RAY_AUTH_MODE=token (docs/security.md). To run without it anyway (a '
    f'private, firewalled network only), set {ALLOW_ENV}=1.')


def gcs_requires_token(gcs_address: str,
                       timeout: float = 10.0) -> Optional[bool]:
  """True if the GCS at 'host:port' refuses a call without Ray's token,
  False if it answers it, None if the question got no answer."""
  import grpc  # pylint: disable=g-import-not-at-top
  from ray.core.generated import gcs_service_pb2  # pylint: disable=g-import-not-at-top
  from ray.core.generated import gcs_service_pb2_grpc  # pylint: disable=g-import-not-at-top
  channel = grpc.insecure_channel(gcs_address)
  try:
    gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
        gcs_service_pb2.GetClusterIdRequest(), timeout=timeout)
    return False
  except grpc.RpcError as e:
    if e.code() == grpc.StatusCode.UNAUTHENTICATED:
      return True
    logging.warning('Could not ask the Ray GCS at %s whether it requires a '
                    'token: %s', gcs_address, e)
    return None
  finally:
    channel.close()


def check_token_auth(launch_type: str) -> None:
  """Raises LaunchError if the connected Ray instance answers a caller
  without a token, unless ALLOW_ENV is set (then it warns)."""
  import ray  # pylint: disable=g-import-not-at-top
  gcs_address = ray.get_runtime_context().gcs_address
  if gcs_requires_token(gcs_address) is not False:
    return
  what = ('The Ray cluster' if launch_type == 'ray' else
          'The local Ray instance (RAY_AUTH_MODE=disabled?)')
  message = (f'{what} at {gcs_address} accepts calls without a token. '
             f'{_FIX}')
  if os.environ.get(ALLOW_ENV, '') not in ('', '0'):
    logging.warning('%s (%s is set: launching anyway.)', message, ALLOW_ENV)
    return
  raise errors.LaunchError(message)
