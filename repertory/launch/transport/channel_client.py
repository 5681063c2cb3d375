"""`ChannelClient`: one authenticated connection to a `ChannelServer`.

The client's half of the handshake (`multiprocessing.connection`'s HMAC
challenge, both ways) and of the framing; see `channel` for the server and
for what the channel refuses.
"""

import os
import select
import socket
import struct
from multiprocessing import connection as mp_connection
from typing import Any, Optional

from absl import logging

from repertory.launch.api import context
from repertory.launch.transport import codec

DEFAULT_MAX_FRAME_BYTES = 256 * 2**20
DEFAULT_READ_TIMEOUT_SECS = 30.0
_OK, _ERROR = 0, 1
_WAIT_LOG_SECS = 60.0


class ChannelError(RuntimeError):
  """The served function raised; the message is its type and text."""


class ChannelAuthenticationError(ConnectionError):
  """The peer does not hold this program's channel key."""


def set_io_timeouts(sock: socket.socket, seconds: float) -> None:
  """Blocking reads and writes on `sock` (and on any fd of it) fail with
  EAGAIN after `seconds` without progress."""
  whole = int(seconds)
  value = struct.pack('ll', whole, int((seconds - whole) * 1e6))
  sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
  sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


def _readable(poller: select.poll, timeout: Optional[float]) -> bool:
  """Waits until a frame begins (or the peer closes); False on timeout."""
  while True:
    try:
      return bool(poller.poll(None if timeout is None else timeout * 1000))
    except InterruptedError:
      continue


class ChannelClient:
  """One authenticated connection to a `ChannelServer`; `call` is not
  thread-safe.

  Args:
    address: the server's 'host:port'.
    connect_timeout: seconds to connect and authenticate.
    authkey: the server's secret; the program's by default
      (`launch.channel_key()`).
    max_frame_bytes: the largest reply accepted (and request sent).
    read_timeout: seconds the rest of a begun reply may take. The wait for
      a reply to begin has no limit (the served function may take long); it
      is logged every minute.

  Raises:
    ChannelAuthenticationError: the server does not hold the same key (or
      refused this one).
    ConnectionError, OSError: nobody listens, or the server closed the
      connection (e.g. at max_connections).
  """

  def __init__(self, address: str, connect_timeout: float = 30.0,
               authkey: Optional[bytes] = None,
               max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
               read_timeout: float = DEFAULT_READ_TIMEOUT_SECS):
    host, _, port = address.rpartition(':')
    if not host or not port.isdigit():
      raise ValueError(f'channel address must be "host:port", got '
                       f'{address!r}.')
    self.address = address
    self._max_frame_bytes = max_frame_bytes
    authkey = context.channel_key() if authkey is None else authkey
    sock = socket.create_connection((host, int(port)),
                                    timeout=connect_timeout)
    try:
      sock.settimeout(None)
      sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      set_io_timeouts(sock, min(connect_timeout or read_timeout,
                                 read_timeout))
      self._conn = mp_connection.Connection(sock.detach())
    finally:
      sock.close()
    try:
      mp_connection.answer_challenge(self._conn, authkey)
      mp_connection.deliver_challenge(self._conn, authkey)
    except mp_connection.AuthenticationError as e:
      self._conn.close()
      raise ChannelAuthenticationError(
          f'The channel server at {address} and this process do not hold '
          f'the same key ({e}): a channel serves only the nodes of its own '
          'program (launch.channel_key()).') from None
    except (EOFError, OSError, AssertionError) as e:
      self._conn.close()
      raise ConnectionError(
          f'The channel server at {address} closed the connection during '
          f'the handshake ({type(e).__name__}: {e}); it may be at its '
          'max_connections, or not a channel server.') from None
    # From now on a stall is judged by read_timeout.
    stream = socket.socket(fileno=os.dup(self._conn.fileno()))
    set_io_timeouts(stream, read_timeout)
    stream.close()
    self._poller = select.poll()
    self._poller.register(self._conn.fileno(), select.POLLIN)

  def call(self, *args: Any) -> Any:
    """`fn(*args)` on the server; raises `ChannelError` if it raised."""
    self.send(*args)
    return self.receive()

  def send(self, *args: Any) -> None:
    """Sends the request of `call(*args)` without waiting for its reply;
    `receive()` returns it. One request at a time: send again only after
    its reply was received."""
    frame = codec.encode(list(args))  # TypeError before anything is sent.
    if len(frame) > self._max_frame_bytes:
      raise ValueError(
          f'A request of {len(frame)} bytes to the channel at {self.address} '
          f'is over max_frame_bytes={self._max_frame_bytes}.')
    self._conn.send_bytes(frame)

  def reply_ready(self) -> bool:
    """Whether the reply of the request sent has begun to arrive (or the
    connection closed): `receive()` then does not wait for the server."""
    return _readable(self._poller, 0)

  def receive(self) -> Any:
    """The reply of the request sent (waiting for it); raises
    `ChannelError` if the call raised on the server."""
    try:
      while not _readable(self._poller, _WAIT_LOG_SECS):
        logging.warning('Still waiting for the reply of the channel server '
                        'at %s.', self.address)
      frame = self._conn.recv_bytes(self._max_frame_bytes)
    except EOFError:
      raise ConnectionError(f'the channel server at {self.address} closed '
                            'the connection.') from None
    try:
      status, value = codec.decode(frame)
    except (codec.CodecError, TypeError, ValueError) as e:
      self.close()
      raise ConnectionError(f'A malformed reply from the channel server at '
                            f'{self.address}: {e}') from None
    if status == _ERROR:
      raise ChannelError(value)
    return value

  def close(self) -> None:
    self._conn.close()
