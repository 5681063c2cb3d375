"""A direct TCP channel for a program's hot calls.

A handle call between processes is a Ray actor call: ~1.5 ms of latency and
CPU on an idle 2-core machine. That is too much for a call made every few
steps: a SEED actor's inference round trip (it capped an actor of 8
environments near 5,000 steps/s; SEED RL streams over gRPC for the same
reason) or an IMPALA actor's weight fetch (every 10 batched steps it cost
40 % of the actor's steps/s). This channel is a plain TCP connection per
client, which the node hands out through a handle call once:

* `ChannelServer(fn, host)` (or `serve_channel(fn)` inside a program)
  listens on `host` (a free port), and serves each
  connection on a thread of its own: read a request (the call's positional
  arguments), call `fn(*args)`, write back the result or the error's text.
  For the inference server `fn` is its batched handler, so the calls of
  concurrent connections are stacked into one forward pass.
* `ChannelClient(address).call(*args)` sends a request and waits for the
  reply; a server-side error is raised as `ChannelError` with its text.

A message is an 8-byte length and a pickle (protocol 5): the trust model of
Ray's own calls, so bind it to loopback or a private cluster address.
Nothing here imports TensorFlow.
"""

import pickle
import socket
import struct
import threading
from typing import Any, Callable, Optional, Set

from repertory.launch import context

# How a client reaches a node's hot method: over a channel or its handle.
TRANSPORTS = ('tcp', 'handle')

_LENGTH = struct.Struct('<Q')
_OK, _ERROR = 0, 1


class ChannelError(RuntimeError):
  """The served function raised; the message is its type and text."""


def _send(sock: socket.socket, message: Any) -> None:
  payload = pickle.dumps(message, protocol=5)
  sock.sendall(_LENGTH.pack(len(payload)) + payload)


def _receive_exactly(sock: socket.socket, size: int,
                     at_message_start: bool) -> Optional[bytearray]:
  """`size` bytes; None if the peer closed cleanly before a new message."""
  buffer = bytearray(size)
  view = memoryview(buffer)
  received = 0
  while received < size:
    count = sock.recv_into(view[received:])
    if count == 0:
      if received == 0 and at_message_start:
        return None
      raise ConnectionError('channel closed in the middle of a message')
    received += count
  return buffer


def _receive(sock: socket.socket) -> Any:
  """The next message, or None if the peer closed the connection."""
  header = _receive_exactly(sock, _LENGTH.size, at_message_start=True)
  if header is None:
    return None
  (size,) = _LENGTH.unpack(header)
  return pickle.loads(_receive_exactly(sock, size, at_message_start=False))


class ChannelServer:
  """Serves `fn(*args)` to `ChannelClient`s; see the module doc."""

  def __init__(self, fn: Callable[..., Any], host: str = '127.0.0.1'):
    self._fn = fn
    self._listener = socket.create_server((host, 0))
    self.address = f'{host}:{self._listener.getsockname()[1]}'
    self._lock = threading.Lock()
    self._connections: Set[socket.socket] = set()
    self._threads: Set[threading.Thread] = set()
    self._closed = False
    threading.Thread(target=self._accept_forever, daemon=True,
                     name=f'channel {self.address}').start()

  def _accept_forever(self) -> None:
    while True:
      try:
        connection, _ = self._listener.accept()
      except OSError:
        return  # close() shut the listener.
      connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      thread = threading.Thread(target=self._serve, args=(connection,),
                                daemon=True,
                                name=f'channel {self.address} connection')
      with self._lock:
        if self._closed:
          connection.close()
          return
        self._connections.add(connection)
        self._threads.add(thread)
      thread.start()

  def _serve(self, connection: socket.socket) -> None:
    try:
      while True:
        args = _receive(connection)
        if args is None:
          return
        try:
          reply = (_OK, self._fn(*args))
        except Exception as e:  # pylint: disable=broad-except
          reply = (_ERROR, f'{type(e).__name__}: {e}')
        _send(connection, reply)
    except OSError:
      return  # The client went away, or close() shut the connection.
    finally:
      with self._lock:
        self._connections.discard(connection)
        self._threads.discard(threading.current_thread())
      connection.close()

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
  """One connection to a `ChannelServer`; `call` is not thread-safe."""

  def __init__(self, address: str, connect_timeout: float = 30.0):
    host, _, port = address.rpartition(':')
    if not host or not port.isdigit():
      raise ValueError(f'channel address must be "host:port", got '
                       f'{address!r}.')
    self.address = address
    self._sock = socket.create_connection((host, int(port)),
                                          timeout=connect_timeout)
    self._sock.settimeout(None)
    self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

  def call(self, *args: Any) -> Any:
    """`fn(*args)` on the server; raises `ChannelError` if it raised."""
    _send(self._sock, args)
    reply = _receive(self._sock)
    if reply is None:
      raise ConnectionError(f'the channel server at {self.address} closed '
                            'the connection.')
    status, value = reply
    if status == _ERROR:
      raise ChannelError(value)
    return value

  def close(self) -> None:
    self._sock.close()


def serve_channel(fn: Callable[..., Any]) -> ChannelServer:
  """A `ChannelServer` of `fn` on this process's `host_ip()`; inside a
  launched program it is closed when the program stops."""
  server = ChannelServer(fn, host=context.host_ip())
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
