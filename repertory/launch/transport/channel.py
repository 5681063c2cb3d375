"""An authenticated TCP channel for a program's hot calls.

A handle call between processes is a Ray actor call, a millisecond or more
of latency and CPU. That is too much for a call made every few steps: a SEED
actor's inference round trip, or an IMPALA actor's weight fetch (SEED RL
streams over gRPC for the same reason). This channel is one TCP connection
per client, which a node hands out through a handle call once:

* `ChannelServer(fn, host)` (or `serve_channel(fn)` inside a program)
  listens on `host` (a free port) and serves every connection from one
  thread: read a request (the call's positional arguments), call
  `fn(*args)`, write back the result or the error's text. For the inference
  server `fn` is its batched handler, and the requests of the connections
  that are ready are stacked into one forward pass on that thread (no
  hand-off between threads, which costs more than the call on small
  batches).
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
  allocated for it, and an array's size against the bytes the message holds
  (`codec`); a frame once begun must progress within `read_timeout`
  seconds; requests are read without waiting on any peer, and a
  connection's requests are served before more of it is read.
* A handshake runs on a thread of its own (a stranger who stalls delays
  nobody else) and has one deadline for the whole of it,
  `handshake_timeout`, however the peer drips its bytes. At most
  `max_handshakes` connections may be in their handshake at once: a new
  connection cuts the oldest unfinished one (if it began over a second
  ago; else the newcomer is closed), so peers that never authenticate
  cannot hold the door shut to one that holds the key (which finishes in a
  round trip, before it could be cut). At most `max_connections` authenticated
  connections are served at once (more are closed at once).
* `serve_channel` binds `launch.host_ip()`: loopback in local_mt and
  local_mp, the Ray node's address on a cluster.
`ChannelClient` and the errors live in `channel_client`, the serving loop in
`serving`; this module re-exports the client. Nothing here imports
TensorFlow or Ray.
"""

import os
import socket
import threading
import time
from multiprocessing import connection as mp_connection
from typing import Any, Callable, Dict, List, Optional, Set

from absl import logging

from repertory.launch.api import context
from repertory.launch.transport import batching
from repertory.launch.transport import serving
from repertory.launch.transport.channel_client import ChannelAuthenticationError  # pylint: disable=unused-import
from repertory.launch.transport.channel_client import ChannelClient  # pylint: disable=unused-import
from repertory.launch.transport.channel_client import ChannelError  # pylint: disable=unused-import
from repertory.launch.transport.channel_client import DEFAULT_MAX_FRAME_BYTES
from repertory.launch.transport.channel_client import DEFAULT_READ_TIMEOUT_SECS
from repertory.launch.transport.channel_client import set_io_timeouts

# How a client reaches a node's hot method: over a channel or its handle.
TRANSPORTS = ('tcp', 'handle')

DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MAX_HANDSHAKES = 16
DEFAULT_HANDSHAKE_TIMEOUT_SECS = 10.0
_CHECK_PERIOD_SECS = 0.25
_MIN_AGE_TO_CUT_SECS = 1.0
_REFUSAL_LOG_SECS = 10.0


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


def _positive(name: str, value: Any) -> None:
  if not (isinstance(value, (int, float)) and value > 0):
    raise ValueError(f'ChannelServer: {name} must be > 0, got {value!r}.')


class ChannelServer:
  """Serves `fn(*args)` to `ChannelClient`s; see the module doc.

  One thread serves every authenticated connection (`serving.ServeLoop`):
  it reads whole requests without blocking on any peer and calls `fn` for
  each, one after another. When `fn` is a `launch.batched_handler`, the
  requests that are ready are stacked into one batched call instead (up to
  its `batch_size`; a partial batch waits at most its `timeout` for more), so
  no request is handed from thread to thread. A `fn` that blocks delays
  every connection; a peer slow to send a request or to read its reply
  delays no other.

  Args:
    fn: the function served.
    host: the address to bind (loopback by default).
    authkey: the secret clients must hold; the program's by default
      (`launch.channel_key()`).
    max_frame_bytes: the largest request accepted (and reply sent).
    max_connections: authenticated connections served at once; more are
      closed at once.
    read_timeout: seconds the rest of a begun frame may take without
      progress (and a reply may wait to be sent); a peer that stalls longer
      is disconnected.
    idle_timeout: seconds an authenticated connection may wait between
      requests (None: for ever).
    handshake_timeout: seconds the whole handshake may take (default: the
      smaller of read_timeout and 10 s).
    max_handshakes: connections in their handshake at once; a new one cuts
      the oldest (one that began over a second ago).
  """

  def __init__(self, fn: Callable[..., Any], host: str = '127.0.0.1',
               authkey: Optional[bytes] = None,
               max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
               max_connections: int = DEFAULT_MAX_CONNECTIONS,
               read_timeout: float = DEFAULT_READ_TIMEOUT_SECS,
               idle_timeout: Optional[float] = None,
               handshake_timeout: Optional[float] = None,
               max_handshakes: int = DEFAULT_MAX_HANDSHAKES):
    if handshake_timeout is None:
      handshake_timeout = min(read_timeout, DEFAULT_HANDSHAKE_TIMEOUT_SECS)
    for name, value in (('max_frame_bytes', max_frame_bytes),
                        ('max_connections', max_connections),
                        ('read_timeout', read_timeout),
                        ('handshake_timeout', handshake_timeout),
                        ('max_handshakes', max_handshakes)):
      _positive(name, value)
    if idle_timeout is not None and idle_timeout <= 0:
      raise ValueError('ChannelServer: idle_timeout must be None or > 0, got '
                       f'{idle_timeout}.')
    self.fn = fn
    self.batcher = fn if isinstance(fn, batching.Batcher) else None
    self._authkey = context.channel_key() if authkey is None else authkey
    self.max_frame_bytes = max_frame_bytes
    self._max_connections = max_connections
    self.read_timeout = read_timeout
    self.idle_timeout = idle_timeout
    self._handshake_timeout = handshake_timeout
    self._max_handshakes = max_handshakes
    # A handshake younger than this is never cut for a newcomer.
    self._min_age_to_cut = min(_MIN_AGE_TO_CUT_SECS, handshake_timeout / 2)
    # How often stalled, idle and late peers are looked for.
    self.check_period = min(_CHECK_PERIOD_SECS, read_timeout / 4,
                            handshake_timeout / 4,
                            (idle_timeout or read_timeout) / 4)
    self._listener = socket.create_server((host, 0))
    self._listener.setblocking(False)
    self.address = f'{host}:{self._listener.getsockname()[1]}'
    self._lock = threading.Lock()
    self._served: Set[socket.socket] = set()  # Authenticated, open.
    # In their handshake, oldest first: socket -> deadline.
    self._handshaking: Dict[socket.socket, float] = {}
    self._handshake_threads: Set[threading.Thread] = set()
    self._joined: List[serving.Peer] = []  # Authenticated, not yet served.
    # A handshake thread or close() writes a byte to wake the server.
    self._wake_reader, self._wake_writer = socket.socketpair()
    self._wake_reader.setblocking(False)
    self._wake_writer.setblocking(False)
    self.closed = False
    self._refused = _RateLimitedLog()
    loop = serving.ServeLoop(self, self._listener, self._wake_reader)
    self._server = threading.Thread(target=loop.run, daemon=True,
                                    name=f'channel {self.address}')
    self._server.start()

  # --- what the serving loop asks of the server -------------------------------

  def admit(self, sock: socket.socket, peer: Any) -> None:
    """Starts the handshake of a new connection (cutting the oldest one if
    `max_handshakes` are under way), or refuses it."""
    with self._lock:
      if self.closed:
        sock.close()
        return
      if len(self._served) >= self._max_connections:
        sock.close()
        self._refused('Channel %s: refused a connection from %s: %d '
                      'connections are open (max_connections)',
                      self.address, peer, self._max_connections)
        return
      if len(self._handshaking) >= self._max_handshakes:
        oldest, deadline = next(iter(self._handshaking.items()))
        started = deadline - self._handshake_timeout
        if time.monotonic() - started < self._min_age_to_cut:
          # All young: a storm of connections; this one waits its turn
          # (a handshake that just began, a keyed peer's, is not cut).
          sock.close()
          self._refused('Channel %s: refused a connection from %s: %d '
                        'handshakes began within %.1f s (max_handshakes)',
                        self.address, peer, self._max_handshakes,
                        self._min_age_to_cut)
          return
        del self._handshaking[oldest]
        _shut(oldest)
        self._refused('Channel %s: cut the oldest unfinished handshake: %d '
                      'are under way (max_handshakes)', self.address,
                      self._max_handshakes)
      self._handshaking[sock] = time.monotonic() + self._handshake_timeout
      thread = threading.Thread(target=self._handshake, args=(sock, peer),
                                daemon=True,
                                name=f'channel {self.address} handshake')
      self._handshake_threads.add(thread)
    thread.start()

  def take_joined(self) -> List[serving.Peer]:
    """The connections authenticated since the last call."""
    with self._lock:
      joined, self._joined = self._joined, []
    return joined

  def cut_late_handshakes(self) -> None:
    """Ends the handshakes past their deadline."""
    now = time.monotonic()
    with self._lock:
      late = [s for s, deadline in self._handshaking.items() if now > deadline]
      for sock in late:
        del self._handshaking[sock]
        _shut(sock)
    for _ in late:
      self._refused('Channel %s: cut a handshake that did not finish within '
                    'handshake_timeout=%.1f s', self.address,
                    self._handshake_timeout)

  def forget_socket(self, sock: socket.socket) -> None:
    with self._lock:
      self._served.discard(sock)
    sock.close()

  # --- the handshake -----------------------------------------------------------

  def _handshake(self, sock: socket.socket, peer) -> None:
    """Authenticates a new connection and hands it to the serving loop."""
    try:
      sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      set_io_timeouts(sock, self._handshake_timeout)  # Each read, at most.
      # The handshake reads and writes a duplicate of the socket's fd;
      # `sock` stays for the serving loop and for close().
      conn = mp_connection.Connection(os.dup(sock.fileno()))
      try:
        mp_connection.deliver_challenge(conn, self._authkey)
        mp_connection.answer_challenge(conn, self._authkey)
      finally:
        conn.close()
      error = None
    except Exception as e:  # pylint: disable=broad-except
      error = e  # A wrong key, a stranger's bytes, a stall, a cut, a close.
    with self._lock:
      self._handshake_threads.discard(threading.current_thread())
      in_time = self._handshaking.pop(sock, None) is not None
      admitted = (error is None and in_time and not self.closed and
                  len(self._served) < self._max_connections)
      if admitted:
        self._served.add(sock)
        self._joined.append(serving.Peer(sock, peer))
        _wake(self._wake_writer)
    if admitted:
      return
    sock.close()
    if error is not None and in_time and not self.closed:
      self._refused('Channel %s: refused a connection from %s that did '
                    'not authenticate (%s: %s)', self.address, peer,
                    type(error).__name__, error)

  def close(self, timeout: float = 10.0) -> None:
    """Stops listening, ends every connection (their clients raise) and
    waits up to `timeout` seconds for a call in progress to return, so that
    none is still running in `fn` while the process shuts down."""
    with self._lock:
      self.closed = True
      threads = list(self._handshake_threads) + [self._server]
      for sock in [self._listener, *self._served, *self._handshaking]:
        _shut(sock)
      _wake(self._wake_writer)
    deadline = time.monotonic() + timeout
    for thread in threads:
      if thread is not threading.current_thread():
        thread.join(max(deadline - time.monotonic(), 0.0))
    self._listener.close()
    if not self._server.is_alive():
      self._wake_reader.close()
      self._wake_writer.close()


def _shut(sock: socket.socket) -> None:
  """Ends `sock`'s connection (a thread blocked on it returns)."""
  try:
    sock.shutdown(socket.SHUT_RDWR)
  except OSError:
    pass  # Not connected (yet, or any more).


def _wake(writer: socket.socket) -> None:
  try:
    writer.send(b'\0')
  except OSError:
    pass  # Full: the server is awake already. Closed: it has stopped.


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
