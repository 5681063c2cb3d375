"""Where and how the remote environment service listens (no TensorFlow)."""

import dataclasses
import os
import secrets
from typing import Optional, Tuple

from repertory_remote import wire as specs_lib

LOOPBACK = '127.0.0.1'


@dataclasses.dataclass
class RemoteOptions:
  """Settings of the service node.

  Attributes:
    host: the address to bind; loopback unless a wider one is asked for
      ('0.0.0.0' or '::' to serve other machines, preferably with TLS).
    port: the port; 0 picks a free one (see `address_file`).
    token_file: a file holding the shared token clients must send; empty:
      `$REPERTORY_REMOTE_TOKEN`, else the token in
      `<address_file's folder>/token` (mode 0600): made once, random, and
      kept for every resume of the run.
    tls_cert_file, tls_key_file: PEM certificate chain and private key to
      serve TLS (both or neither).
    max_episodes: the most episodes open at once over all sessions.
    max_sessions: the most concurrent sessions over all clients (more get
      RESOURCE_EXHAUSTED).
    max_sessions_per_peer: the most sessions one connection may hold.
    hello_timeout_s: a session that sends no Hello this long is closed.
    max_abs_reward: rewards outside +-this (or outside the reward spec's
      bounds) are refused (INVALID_ARGUMENT naming step.reward).
    max_abs_observation: float observations of a spec without bounds must
      stay inside +-this (a `BoundedArray` spec's own bounds apply else).
    max_batch_size: the most episodes' steps one forward pass serves.
    batch_timeout_ms: a partial batch runs this long after its first step
      arrived (0: as soon as the previous batch is done).
    address_file: the service writes 'host:port' there once it listens.
  """
  host: str = LOOPBACK
  port: int = 0
  token_file: str = ''
  tls_cert_file: str = ''
  tls_key_file: str = ''
  max_episodes: int = 128
  max_sessions: int = 128
  max_sessions_per_peer: int = 8
  hello_timeout_s: float = 10.0
  max_abs_reward: float = 1000.0
  max_abs_observation: float = 1e6
  max_batch_size: int = 64
  batch_timeout_ms: float = 0.5
  address_file: str = ''
  # The token itself when given programmatically (never logged or saved).
  token_value: str = dataclasses.field(default='', repr=False)

  def __post_init__(self):
    if not 0 <= self.port < 65536:
      raise ValueError(f'RemoteOptions.port={self.port} must be in 0..65535.')
    for name in ('max_episodes', 'max_sessions', 'max_batch_size'):
      if getattr(self, name) < 1:
        raise ValueError(f'RemoteOptions.{name}={getattr(self, name)} must be '
                         '>= 1.')
    for name in ('max_sessions_per_peer', 'hello_timeout_s',
                 'max_abs_reward', 'max_abs_observation'):
      if not getattr(self, name) > 0:
        raise ValueError(f'RemoteOptions.{name}={getattr(self, name)} must be '
                         '> 0.')
    if self.batch_timeout_ms < 0:
      raise ValueError('RemoteOptions.batch_timeout_ms='
                       f'{self.batch_timeout_ms} must be >= 0.')
    if bool(self.tls_cert_file) != bool(self.tls_key_file):
      raise ValueError('RemoteOptions: give both tls_cert_file and '
                       'tls_key_file, or neither.')
    for name in ('token_file', 'tls_cert_file', 'tls_key_file'):
      path = getattr(self, name)
      if path and not os.path.isfile(path):
        raise ValueError(f'RemoteOptions.{name}={path!r}: no such file.')

  def resolve_token(self) -> 'RemoteOptions':
    """A copy holding the token (read or generated now, in the launching
    process), so that every restart of the node uses the same one."""
    token = self.token_value
    if not token and self.token_file:
      with open(self.token_file) as f:
        token = f.read().strip()
      if not token:
        raise ValueError(f'RemoteOptions.token_file={self.token_file!r} is '
                         'empty.')
    if not token:
      token = os.environ.get(specs_lib.TOKEN_ENV_VAR, '')
    if not token and self.address_file:
      token = _run_token(os.path.join(
          os.path.dirname(os.path.abspath(self.address_file)), 'token'))
    if not token:
      token = secrets.token_urlsafe(24)
    return dataclasses.replace(self, token_value=token)

  def token(self) -> str:
    if not self.token_value:
      raise ValueError('RemoteOptions has no token: call resolve_token() in '
                       'the launching process.')
    return self.token_value

  def tls(self) -> Optional[Tuple[bytes, bytes]]:
    if not self.tls_cert_file:
      return None
    with open(self.tls_key_file, 'rb') as f:
      key = f.read()
    with open(self.tls_cert_file, 'rb') as f:
      chain = f.read()
    return key, chain


def _run_token(path: str) -> str:
  """The run's token in `path`: read if the file holds one (a resumed run
  keeps its clients' token), else made and written. Either way the file
  ends with mode 0600, whatever mode it had."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
  os.fchmod(descriptor, 0o600)
  with os.fdopen(descriptor, 'r+') as f:
    token = f.read().strip()
    if not token:
      token = secrets.token_urlsafe(24)
      f.seek(0)
      f.truncate()
      f.write(token + '\n')
  return token
