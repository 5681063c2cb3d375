"""Whether the Ray instance a program runs on requires Ray's token.

Ray's GCS, raylets and workers listen on all interfaces (Ray 2.60 has no
option to bind them to loopback) and run any code a caller sends them. With
token authentication (`RAY_AUTH_MODE=token`) they refuse a caller without
the cluster's token; `ray.init()` of a new local instance turns it on, but
`ray start --head` does not unless a token exists, and a driver given an
address never turns it on. `check_token_auth` asks the GCS directly, with a
call that carries no token, and refuses to launch on an instance that
answers it (see docs/security.md for the cluster recipe).

Ray writes the token of a new local instance to ~/.ray/auth_token with the
process's umask (often 0644), where every local user can read it and use
it. `private_token_file`, called before a local instance starts, creates
the file readable by its owner only, or narrows an existing one.
"""

import os
import secrets
import stat
from typing import Optional

from absl import logging

from repertory.launch.api import errors

# Set to 1 to launch on a Ray instance without token auth all the same.
ALLOW_ENV = 'REPERTORY_ALLOW_UNAUTHENTICATED_RAY'
# Ray's switch for token authentication ('token' or 'disabled').
AUTH_MODE_ENV = 'RAY_AUTH_MODE'

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


def private_token_file() -> None:
  """Ray's default token file, ~/.ray/auth_token, readable by its owner only.

  Creates it (a new 256-bit token, as `ray get-auth-token --generate`
  makes) with mode 0600 in a 0700 ~/.ray if it does not exist, and narrows
  an existing file of this user that others can read. Nothing is done when
  token auth is off (`RAY_AUTH_MODE` other than token) or the token comes
  from `RAY_AUTH_TOKEN` / `RAY_AUTH_TOKEN_PATH`.
  """
  if os.environ.get('RAY_AUTH_MODE', 'token').lower() != 'token' or any(
      os.environ.get(k) for k in ('RAY_AUTH_TOKEN', 'RAY_AUTH_TOKEN_PATH')):
    return
  directory = os.path.join(os.path.expanduser('~'), '.ray')
  path = os.path.join(directory, 'auth_token')
  if not os.path.exists(directory):
    os.makedirs(directory, mode=0o700, exist_ok=True)
  try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
  except FileExistsError:
    info = os.stat(path)
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
      os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
      logging.warning('Ray\'s token file %s was readable by other users '
                      '(mode %o); it is now 0600.', path,
                      stat.S_IMODE(info.st_mode))
    return
  with os.fdopen(fd, 'w') as f:
    f.write(secrets.token_hex(32))
