"""An authenticated TCP channel for a program's hot calls.

A handle call between processes is a Ray actor call, a millisecond or more
of latency and CPU. That is too much for a call made every few steps: a SEED
actor's inference round trip, or an IMPALA actor's weight fetch (SEED RL
streams over gRPC for the same reason). This channel is one TCP connection
per client, which a node hands out through a handle call once:

* `ChannelServer(fn, host)` (or `serve_channel(fn)` inside a program)
  listens on `host` (a free port) and serves each connection on a thread of
  its own: read a request (the call's positional arguments), call
  `fn(*args)`, write back the result or the error's text. For the inference
  server `fn` is its batched handler, so the calls of concurrent connections
  are stacked into one forward pass.
* `ChannelClient(address).call(*args)` sends a request and waits for the
  reply; a server-side error is raised as `ChannelError` with its text.
  `send(*args)`, `reply_ready()` and `receive()` are its two halves, for a
  caller that goes on working while the server answers.

Security (see docs/security.md):

* Framing and authentication are the standard library's
  `multiprocessing.connection`: before anything else, server and client
  each prove to the other that they hold the program's secret key (an HMAC
  challenge, `deliver_challenge` / `answer_challenge`), reading at most 256
  bytes from a peer that has not. The key (`launch.channel_key()`) is made
  by the launcher and reaches the nodes through Ray's authenticated actor
  creation, or is in-process for threads; it never travels over a channel.
* Messages are `launch.codec` (MessagePack with numpy arrays): no pickle, so
  no message can name a class or a function to run, on either side.
* A frame's length is checked against `max_frame_bytes` before anything is
  allocated for it; a handshake, and a frame once begun, must arrive within
  `read_timeout` seconds; at most `max_connections` connections are served
  at once (the others are closed at once).
* `serve_channel` binds `launch.host_ip()`: loopback in local_mt and
  local_mp, the Ray node's address on a cluster.

Nothing here imports TensorFlow or Ray.
"""

import os
import select
import socket
import struct
import threading
import time
from multiprocessing import connection as mp_connection
from typing import Any, Callable, Optional, Set

from absl import logging

from repertory.launch import codec
from repertory.launch import context

# How a client reaches a node's hot method: over a channel or its handle.
TRANSPORTS = ('tcp', 'handle')

DEFAULT_MAX_FRAME_BYTES = 256 * 2**20
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_READ_TIMEOUT_SECS = 30.0
_OK, _ERROR = 0, 1
_WAIT_LOG_SECS = 60.0
_REFUSAL_LOG_SECS = 10.0


class ChannelError(RuntimeError):
  """The served function raised; the message is its type and text."""


class ChannelAuthenticationError(ConnectionError):
  """The peer does not hold this program's channel key."""


def _set_io_timeouts(sock: socket.socket, seconds: float) -> None:
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


class _RateLimitedLog:
  """Logs a warning at most every `_REFUSAL_LOG_SECS`, with a count."""

  def __init__(self):
    self._lock = threading.Lock()
    self._next = 0.0
    self._count = 0

  def __call__(self, message: str, *args) -> None:
    with self._lock:
      self._count += 1
      now = time.monotonic()
      if now < self._next:
        return
      self._next = now + _REFUSAL_LOG_SECS
      count, self._count = self._count, 0
    logging.warning(message + ' (%d such in the last %.0f s)', *args, count,
                    _REFUSAL_LOG_SECS)


class ChannelServer:
  """Serves `fn(*args)` to `ChannelClient`s; see the module doc.

  Args:
    fn: the function served.
    host: the address to bind (loopback by default).
    authkey: the secret clients must hold; the program's by default
      (`launch.channel_key()`).
    max_frame_bytes: the largest request accepted (and reply sent).
    max_connections: connections served at once; more are closed at once.
    read_timeout: seconds a handshake, or the rest of a begun frame, may
      take; a peer that stalls longer is disconnected.
    idle_timeout: seconds an authenticated connection may wait between
      requests (None: for ever).
  """

  def __init__(self, fn: Callable[..., Any], host: str = '127.0.0.1',
               authkey: Optional[bytes] = None,
               max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
               max_connections: int = DEFAULT_MAX_CONNECTIONS,
               read_timeout: float = DEFAULT_READ_TIMEOUT_SECS,
               idle_timeout: Optional[float] = None):
    if max_frame_bytes < 1 or max_connections < 1 or read_timeout <= 0:
      raise ValueError(
          'ChannelServer: max_frame_bytes, max_connections and read_timeout '
          f'must be > 0, got {max_frame_bytes}, {max_connections}, '
          f'{read_timeout}.')
    self._fn = fn
    self._authkey = context.channel_key() if authkey is None else authkey
    self._max_frame_bytes = max_frame_bytes
    self._max_connections = max_connections
    self._read_timeout = read_timeout
    self._idle_timeout = idle_timeout
    self._listener = socket.create_server((host, 0))
    self.address = f'{host}:{self._listener.getsockname()[1]}'
    self._lock = threading.Lock()
    self._connections: Set[socket.socket] = set()
    self._threads: Set[threading.Thread] = set()
    self._closed = False
    self._refused = _RateLimitedLog()
    threading.Thread(target=self._accept_forever, daemon=True,
                     name=f'channel {self.address}').start()

  def _accept_forever(self) -> None:
    while True:
      try:
        sock, peer = self._listener.accept()
      except OSError:
        return  # close() shut the listener.
      with self._lock:
        if self._closed:
          sock.close()
          return
        if len(self._connections) >= self._max_connections:
          sock.close()
          self._refused('Channel %s: refused a connection from %s: %d '
                        'connections are open (max_connections)',
                        self.address, peer, self._max_connections)
          continue
        thread = threading.Thread(target=self._serve, args=(sock, peer),
                                  daemon=True,
                                  name=f'channel {self.address} connection')
        self._connections.add(sock)
        self._threads.add(thread)
      thread.start()

  def _serve(self, sock: socket.socket, peer) -> None:
    conn = None
    try:
      sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      _set_io_timeouts(sock, self._read_timeout)
      # The Connection reads and writes a duplicate of the socket's fd;
      # `sock` stays for close() to shut the connection down.
      conn = mp_connection.Connection(os.dup(sock.fileno()))
      try:
        mp_connection.deliver_challenge(conn, self._authkey)
        mp_connection.answer_challenge(conn, self._authkey)
      except Exception as e:  # pylint: disable=broad-except
        # A wrong key, a stranger's bytes, a stall or a closed socket.
        if not self._closed:
          self._refused('Channel %s: refused a connection from %s that did '
                        'not authenticate (%s: %s)', self.address, peer,
                        type(e).__name__, e)
        return
      poller = select.poll()
      poller.register(conn.fileno(), select.POLLIN)
      while True:
        if not _readable(poller, self._idle_timeout):
          return  # Idle for idle_timeout.
        try:
          frame = conn.recv_bytes(self._max_frame_bytes)
        except EOFError:
          return  # The client closed the connection.
        except OSError as e:
          if not self._closed:
            logging.warning('Channel %s: dropped the connection from %s: %s '
                            '(a frame over max_frame_bytes=%d, or stalled '
                            'for read_timeout=%.0f s).', self.address, peer,
                            e, self._max_frame_bytes, self._read_timeout)
          return
        try:
          args = codec.decode(frame)
          if not isinstance(args, list):
            raise codec.CodecError('a request must be a list of arguments')
        except codec.CodecError as e:
          logging.warning('Channel %s: a malformed request from %s (%s); '
                          'closing its connection.', self.address, peer, e)
          self._reply(conn, (_ERROR, f'CodecError: {e}'))
          return
        del frame
        try:
          reply = (_OK, self._fn(*args))
        except Exception as e:  # pylint: disable=broad-except
          reply = (_ERROR, f'{type(e).__name__}: {e}')
        del args
        self._reply(conn, reply)
    except OSError:
      return  # The client went away, or close() shut the connection.
    finally:
      with self._lock:
        self._connections.discard(sock)
        self._threads.discard(threading.current_thread())
      if conn is not None:
        conn.close()
      sock.close()

  def _reply(self, conn: mp_connection.Connection, reply) -> None:
    try:
      frame = codec.encode(reply)
    except Exception as e:  # pylint: disable=broad-except
      # TypeError: not data; OverflowError: an int over 64 bits.
      frame = codec.encode((_ERROR, f'{type(e).__name__}: the reply cannot '
                                    f'travel over the channel: {e}'))
    if len(frame) > self._max_frame_bytes:
      frame = codec.encode((_ERROR, f'ValueError: the reply of {len(frame)} '
                                    'bytes is over max_frame_bytes='
                                    f'{self._max_frame_bytes}'))
    conn.send_bytes(frame)

  def close(self, timeout: float = 10.0) -> None:
    """Stops listening, ends every connection (their clients raise) and
    waits up to `timeout` seconds for calls in progress to return, so that
    none is still running in `fn` while the process shuts down."""
    with self._lock:
      self._closed = True
      connections = list(self._connections)
      threads = list(self._threads)
      for sock in [self._listener] + connections:
        try:
          sock.shutdown(socket.SHUT_RDWR)
        except OSError:
          pass  # Not connected (yet, or any more).
    self._listener.close()
    for thread in threads:
      if thread is not threading.current_thread():
        thread.join(timeout)


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
      _set_io_timeouts(sock, min(connect_timeout or read_timeout,
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
    _set_io_timeouts(stream, read_timeout)
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


def serve_channel(fn: Callable[..., Any], **kwargs) -> ChannelServer:
  """A `ChannelServer` of `fn` on this process's `host_ip()` with the
  program's key; inside a launched program it is closed when the program
  stops. `kwargs` go to `ChannelServer`."""
  server = ChannelServer(fn, host=context.host_ip(), **kwargs)
  if context.get_launch_type() is not None:
    context.register_stop_handler(server.close)
  return server


class LazyChannel:
  """`serve_channel(fn)`, started by the first `address()` call."""

  def __init__(self, fn: Callable[..., Any]):
    self._fn = fn
    self._lock = threading.Lock()
    self._server: Optional[ChannelServer] = None

  def address(self) -> str:
    """The channel's 'host:port' (starts it once)."""
    with self._lock:
      if self._server is None:
        self._server = serve_channel(self._fn)
      return self._server.address

  def close(self) -> None:
    """Closes the channel if it was started (a later `address()` starts a
    new one)."""
    with self._lock:
      server, self._server = self._server, None
    if server is not None:
      server.close()
