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
  allocated for it; a handshake (on a thread of its own, so that a stranger
  who stalls delays nobody else), and a frame once begun, must progress
  within `read_timeout` seconds; requests are read without waiting on any
  peer, and a connection's requests are served before more of it is read;
  at most `max_connections` connections are served at once (the
  others are closed at once).
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
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from absl import logging

from repertory.launch.transport import batching
from repertory.launch.transport import codec
from repertory.launch.api import context

# How a client reaches a node's hot method: over a channel or its handle.
TRANSPORTS = ('tcp', 'handle')

DEFAULT_MAX_FRAME_BYTES = 256 * 2**20
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_READ_TIMEOUT_SECS = 30.0
_OK, _ERROR = 0, 1
_DROP = object()  # `_next_request`: disconnect the peer.
_READ_BYTES = 1 << 20
_CHECK_PERIOD_SECS = 0.25
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
  return bool(_poll(poller, timeout))


def _poll(poller: select.poll, timeout: Optional[float]):
  """`poller.poll` with a timeout in seconds (None: no limit)."""
  while True:
    try:
      return poller.poll(None if timeout is None else timeout * 1000)
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


class _Peer:
  """An authenticated connection, as the serving thread reads and answers
  it: reading (polled for input), waiting for its batch (not polled), or
  sending a reply (polled for output)."""
  __slots__ = ('sock', 'name', 'buffer', 'outbox', 'last_progress', 'busy',
               'mask')

  def __init__(self, sock: socket.socket, name: Any):
    self.sock = sock
    self.name = name
    self.buffer = bytearray()     # Bytes received, not yet a whole request.
    self.outbox: Optional[List[memoryview]] = None  # A reply's unsent rest.
    self.last_progress = time.monotonic()  # Of a read, or of a send.
    self.busy = False             # A request of it waits for its batch.
    self.mask = 0                 # The events it is polled for.


class ChannelServer:
  """Serves `fn(*args)` to `ChannelClient`s; see the module doc.

  One thread serves every authenticated connection: it polls them all,
  reads whole requests without blocking on any peer, and calls `fn` for
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
    max_connections: connections served at once; more are closed at once.
    read_timeout: seconds a handshake, or the rest of a begun frame, may
      take without progress (and a reply may wait to be sent); a peer that
      stalls longer is disconnected.
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
    if idle_timeout is not None and idle_timeout <= 0:
      raise ValueError('ChannelServer: idle_timeout must be None or > 0, got '
                       f'{idle_timeout}.')
    self._fn = fn
    self._batcher = fn if isinstance(fn, batching.Batcher) else None
    self._authkey = context.channel_key() if authkey is None else authkey
    self._max_frame_bytes = max_frame_bytes
    self._max_connections = max_connections
    self._read_timeout = read_timeout
    self._idle_timeout = idle_timeout
    # How often stalled and idle peers are looked for.
    self._check_period = min(_CHECK_PERIOD_SECS, read_timeout / 4,
                             (idle_timeout or read_timeout) / 4)
    self._listener = socket.create_server((host, 0))
    self.address = f'{host}:{self._listener.getsockname()[1]}'
    self._lock = threading.Lock()
    self._sockets: Set[socket.socket] = set()  # Every open connection.
    self._handshakes: Set[threading.Thread] = set()
    self._joined: List[_Peer] = []  # Authenticated, not yet served.
    # A handshake thread or close() writes a byte to wake the server.
    self._wake_reader, self._wake_writer = socket.socketpair()
    self._wake_reader.setblocking(False)
    self._wake_writer.setblocking(False)
    self._closed = False
    self._refused = _RateLimitedLog()
    self._server = threading.Thread(target=self._serve_forever, daemon=True,
                                    name=f'channel {self.address}')
    self._server.start()
    threading.Thread(target=self._accept_forever, daemon=True,
                     name=f'channel {self.address} accept').start()

  # --- connections: accept and authenticate ---------------------------------

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
        if len(self._sockets) >= self._max_connections:
          sock.close()
          self._refused('Channel %s: refused a connection from %s: %d '
                        'connections are open (max_connections)',
                        self.address, peer, self._max_connections)
          continue
        thread = threading.Thread(target=self._handshake, args=(sock, peer),
                                  daemon=True,
                                  name=f'channel {self.address} handshake')
        self._sockets.add(sock)
        self._handshakes.add(thread)
      thread.start()

  def _handshake(self, sock: socket.socket, peer) -> None:
    """Authenticates a new connection and hands it to the serving thread."""
    try:
      sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      _set_io_timeouts(sock, self._read_timeout)
      # The handshake reads and writes a duplicate of the socket's fd;
      # `sock` stays for the serving thread and for close().
      conn = mp_connection.Connection(os.dup(sock.fileno()))
      try:
        mp_connection.deliver_challenge(conn, self._authkey)
        mp_connection.answer_challenge(conn, self._authkey)
      finally:
        conn.close()
    except Exception as e:  # pylint: disable=broad-except
      # A wrong key, a stranger's bytes, a stall or a closed socket.
      if not self._closed:
        self._refused('Channel %s: refused a connection from %s that did '
                      'not authenticate (%s: %s)', self.address, peer,
                      type(e).__name__, e)
      self._close_socket(sock)
      return
    finally:
      with self._lock:
        self._handshakes.discard(threading.current_thread())
    with self._lock:
      if not self._closed:
        self._joined.append(_Peer(sock, peer))
        self._wake()
        return
    self._close_socket(sock)

  def _wake(self) -> None:
    try:
      self._wake_writer.send(b'\0')
    except OSError:
      pass  # Full: the server is awake already. Closed: it has stopped.

  def _close_socket(self, sock: socket.socket) -> None:
    with self._lock:
      self._sockets.discard(sock)
    sock.close()

  # --- serving: one thread for every connection -----------------------------

  def _serve_forever(self) -> None:
    poller = select.poll()
    poller.register(self._wake_reader.fileno(), select.POLLIN)
    peers: Dict[int, _Peer] = {}
    # Requests waiting for their batch: (peer, arguments, arrival time).
    pending: List[Tuple[_Peer, list, float]] = []
    next_check = time.monotonic() + self._check_period

    def watch(peer: _Peer, mask: int) -> None:
      if mask:
        poller.register(peer.sock.fileno(), mask)
      elif peer.mask:
        poller.unregister(peer.sock.fileno())
      peer.mask = mask

    def forget(peer: _Peer) -> None:
      if peers.pop(peer.sock.fileno(), None) is not None:
        watch(peer, 0)
      self._close_socket(peer.sock)

    def reply(peer: _Peer, message) -> bool:
      """Sends what it can of a reply; True if the peer may go on."""
      peer.outbox = self._reply_frame(message)
      peer.last_progress = time.monotonic()
      return send(peer)

    def send(peer: _Peer) -> bool:
      """Sends more of the peer's reply; True once it is all sent (then
      the peer is read again)."""
      try:
        while peer.outbox:
          sent = peer.sock.sendmsg(peer.outbox, (), socket.MSG_DONTWAIT)
          peer.last_progress = time.monotonic()
          while sent:
            part = peer.outbox[0]
            if sent < len(part):
              peer.outbox[0] = part[sent:]
              break
            sent -= len(part)
            peer.outbox.pop(0)
      except (BlockingIOError, InterruptedError):
        watch(peer, select.POLLOUT)  # The rest once the peer reads.
        return False
      except OSError:
        forget(peer)  # The client went away, or close() shut it down.
        return False
      peer.outbox = None
      watch(peer, select.POLLIN)
      return True

    def take(peer: _Peer) -> None:
      """Serves, or queues for a batch, the whole requests the peer sent."""
      while True:
        request = self._next_request(peer)
        if request is None:
          return
        if request is _DROP:
          forget(peer)
          return
        if self._batcher is not None:
          pending.append((peer, request, time.monotonic()))
          peer.busy = True  # Read no more of it until it is answered.
          watch(peer, 0)
          return
        if not reply(peer, self._call(request)):
          return

    def run_batch(batch: List[Tuple[_Peer, list, float]]) -> None:
      try:
        messages = [(_OK, value) for value in self._batcher.call_batch(
            [args for _, args, _ in batch])]
      except Exception as e:  # pylint: disable=broad-except
        messages = [(_ERROR, f'{type(e).__name__}: {e}')] * len(batch)
      for (peer, _, _), message in zip(batch, messages):
        peer.busy = False
        if peers.get(peer.sock.fileno()) is peer and reply(peer, message):
          take(peer)  # A request it sent before its reply came.

    try:
      while not self._closed:
        now = time.monotonic()
        timeout = next_check - now
        if pending:
          timeout = min(timeout, pending[0][2] + self._batcher.timeout - now)
        events = _poll(poller, max(timeout, 0.0))
        for fd, _ in events:
          if fd == self._wake_reader.fileno():
            self._drain_wake()
            with self._lock:
              joined, self._joined = self._joined, []
            for peer in joined:
              peers[peer.sock.fileno()] = peer
              watch(peer, select.POLLIN)
            continue
          peer = peers.get(fd)
          if peer is None or peer.busy:
            continue
          if peer.outbox is not None:
            if send(peer):
              take(peer)
          elif self._receive(peer):
            take(peer)
          else:
            forget(peer)
        if self._batcher is not None:
          size = self._batcher.batch_size
          while pending and (len(pending) >= size or time.monotonic() >=
                             pending[0][2] + self._batcher.timeout):
            batch, pending = pending[:size], pending[size:]
            run_batch(batch)
        if time.monotonic() >= next_check:
          next_check = time.monotonic() + self._check_period
          for peer in self._stalled_or_idle(list(peers.values())):
            forget(peer)
    except Exception:  # pylint: disable=broad-except
      if not self._closed:
        logging.exception('Channel %s: the serving thread failed; closing '
                          'its connections.', self.address)
    finally:
      with self._lock:
        self._closed = True
        joined, self._joined = self._joined, []
      for peer in list(peers.values()) + joined:
        self._close_socket(peer.sock)

  def _drain_wake(self) -> None:
    try:
      while self._wake_reader.recv(4096):
        pass
    except OSError:
      pass  # Nothing more to read.

  def _receive(self, peer: _Peer) -> bool:
    """Reads what the peer sent; False if it closed or failed."""
    try:
      data = peer.sock.recv(_READ_BYTES, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
      return True
    except OSError:
      return False
    if not data:
      return False  # The client closed the connection.
    peer.buffer += data
    peer.last_progress = time.monotonic()
    return True

  def _next_request(self, peer: _Peer):
    """The arguments of the peer's next whole request; None if it has not
    all arrived; `_DROP` if the peer must be disconnected (a frame over
    `max_frame_bytes`, or a malformed request, told its error if the
    socket takes it at once)."""
    buffer = peer.buffer
    if len(buffer) < 4:
      return None
    size, = struct.unpack_from('!i', buffer)
    start = 4
    if size == -1:  # multiprocessing's header of a frame over 2 GiB.
      if len(buffer) < 12:
        return None
      size, = struct.unpack_from('!Q', buffer, 4)
      start = 12
    if not 0 <= size <= self._max_frame_bytes:
      if not self._closed:
        logging.warning('Channel %s: dropped the connection from %s: a frame '
                        'of %d bytes is over max_frame_bytes=%d.',
                        self.address, peer.name, size, self._max_frame_bytes)
      return _DROP
    if len(buffer) < start + size:
      return None
    frame = bytes(buffer[start:start + size])
    del buffer[:start + size]
    try:
      args = codec.decode(frame)
      if not isinstance(args, list):
        raise codec.CodecError('a request must be a list of arguments')
    except codec.CodecError as e:
      logging.warning('Channel %s: a malformed request from %s (%s); '
                      'closing its connection.', self.address, peer.name, e)
      try:
        peer.sock.sendmsg(self._reply_frame((_ERROR, f'CodecError: {e}')),
                          (), socket.MSG_DONTWAIT)
      except OSError:
        pass  # It is dropped all the same.
      return _DROP
    return args

  def _call(self, args: list):
    try:
      return (_OK, self._fn(*args))
    except Exception as e:  # pylint: disable=broad-except
      return (_ERROR, f'{type(e).__name__}: {e}')

  def _stalled_or_idle(self, peers: List[_Peer]) -> List[_Peer]:
    """Peers that made no progress for read_timeout within a frame or a
    reply, or were silent for idle_timeout between requests."""
    now = time.monotonic()
    found = []
    for peer in peers:
      silent = now - peer.last_progress
      if peer.busy:
        continue
      if (peer.buffer or peer.outbox) and silent > self._read_timeout:
        if not self._closed:
          logging.warning('Channel %s: dropped the connection from %s: its '
                          '%s stalled for read_timeout=%.1f s.', self.address,
                          peer.name, 'reply' if peer.outbox else 'request',
                          self._read_timeout)
        found.append(peer)
      elif (not peer.buffer and peer.outbox is None and
            self._idle_timeout is not None and silent > self._idle_timeout):
        found.append(peer)  # Idle for idle_timeout.
    return found

  def _reply_frame(self, message) -> List[memoryview]:
    """A reply in multiprocessing.connection's framing (as
    `ChannelClient` reads it): [header, payload]."""
    try:
      frame = codec.encode(message)
    except Exception as e:  # pylint: disable=broad-except
      # TypeError: not data; OverflowError: an int over 64 bits.
      frame = codec.encode((_ERROR, f'{type(e).__name__}: the reply cannot '
                                    f'travel over the channel: {e}'))
    if len(frame) > self._max_frame_bytes:
      frame = codec.encode((_ERROR, f'ValueError: the reply of {len(frame)} '
                                    'bytes is over max_frame_bytes='
                                    f'{self._max_frame_bytes}'))
    return [memoryview(struct.pack('!i', len(frame))), memoryview(frame)]

  def close(self, timeout: float = 10.0) -> None:
    """Stops listening, ends every connection (their clients raise) and
    waits up to `timeout` seconds for a call in progress to return, so that
    none is still running in `fn` while the process shuts down."""
    with self._lock:
      self._closed = True
      sockets = list(self._sockets)
      threads = list(self._handshakes) + [self._server]
      for sock in [self._listener] + sockets:
        try:
          sock.shutdown(socket.SHUT_RDWR)
        except OSError:
          pass  # Not connected (yet, or any more).
      self._wake()
    self._listener.close()
    deadline = time.monotonic() + timeout
    for thread in threads:
      if thread is not threading.current_thread():
        thread.join(max(deadline - time.monotonic(), 0.0))
    if not self._server.is_alive():
      self._wake_reader.close()
      self._wake_writer.close()


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
