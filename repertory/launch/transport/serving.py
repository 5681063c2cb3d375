"""The serving loop of `ChannelServer`: one thread, one `selectors` selector.

The loop owns the listening socket and every authenticated connection. It
waits on one selector for:

| registered | event | what the loop does |
|---|---|---|
| the listener | readable | accepts; hands the socket to `ChannelServer.admit` (the handshake) |
| the wake socket | readable | takes the connections whose handshake succeeded |
| a peer reading | readable | reads what arrived; serves, or queues for a batch, each whole request |
| a peer replying | writable | sends more of its reply |

A peer whose request waits for its batch is not registered (nothing more of
it is read until it is answered). Between events the loop runs batches that
are full or whose oldest request waited the batcher's `timeout`, and every
`check_period` it drops peers stalled in a frame or idle too long and asks
the server to cut handshakes past their deadline.
"""

import selectors
import socket
import struct
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging

from repertory.launch.transport import codec

OK, ERROR = 0, 1
_READ_BYTES = 1 << 20
_DROP = object()  # `next_request`: disconnect the peer.


class Peer:
  """An authenticated connection: reading (registered for reads), waiting
  for its batch (not registered), or sending a reply (registered for
  writes)."""
  __slots__ = ('sock', 'name', 'buffer', 'outbox', 'last_progress', 'busy',
               'events')

  def __init__(self, sock: socket.socket, name: Any):
    self.sock = sock
    self.name = name
    self.buffer = bytearray()     # Bytes received, not yet a whole request.
    self.outbox: Optional[List[memoryview]] = None  # A reply's unsent rest.
    self.last_progress = time.monotonic()  # Of a read, or of a send.
    self.busy = False             # A request of it waits for its batch.
    self.events = 0               # The events it is registered for.


def reply_frame(message: Any, max_frame_bytes: int) -> List[memoryview]:
  """A reply in multiprocessing.connection's framing: [header, payload]."""
  try:
    frame = codec.encode(message)
  except Exception as e:  # pylint: disable=broad-except
    # TypeError: not data; OverflowError: an int over 64 bits.
    frame = codec.encode((ERROR, f'{type(e).__name__}: the reply cannot '
                                 f'travel over the channel: {e}'))
  if len(frame) > max_frame_bytes:
    frame = codec.encode((ERROR, f'ValueError: the reply of {len(frame)} '
                                 'bytes is over max_frame_bytes='
                                 f'{max_frame_bytes}'))
  return [memoryview(struct.pack('!i', len(frame))), memoryview(frame)]


class ServeLoop:
  """Serves `server`'s connections until `server.closed`; see the module
  doc. `server` is the `ChannelServer` (its settings, `admit`,
  `take_joined`, `cut_late_handshakes`, `forget_socket`, `closed`)."""

  def __init__(self, server, listener: socket.socket,
               wake_reader: socket.socket):
    self._server = server
    self._fn: Callable[..., Any] = server.fn
    self._batcher = server.batcher
    self._listener = listener
    self._wake_reader = wake_reader
    self._selector = selectors.DefaultSelector()
    self._selector.register(listener, selectors.EVENT_READ, 'accept')
    self._selector.register(wake_reader, selectors.EVENT_READ, 'wake')
    self._peers: Dict[int, Peer] = {}
    # Requests waiting for their batch: (peer, arguments, arrival time).
    self._pending: List[Tuple[Peer, list, float]] = []

  # --- the loop --------------------------------------------------------------

  def run(self) -> None:
    """Serves until the server closes; then closes every connection."""
    server = self._server
    next_check = time.monotonic() + server.check_period
    try:
      while not server.closed:
        for key, _ in self._selector.select(self._wait(next_check)):
          self._on_event(key)
        self._run_due_batches()
        if time.monotonic() >= next_check:
          next_check = time.monotonic() + server.check_period
          for peer in self._stalled_or_idle():
            self._forget(peer)
          server.cut_late_handshakes()
    except Exception:  # pylint: disable=broad-except
      if not server.closed:
        logging.exception('Channel %s: the serving thread failed; closing '
                          'its connections.', server.address)
    finally:
      server.closed = True
      for peer in list(self._peers.values()) + server.take_joined():
        server.forget_socket(peer.sock)
      self._selector.close()

  def _wait(self, next_check: float) -> float:
    now = time.monotonic()
    timeout = next_check - now
    if self._pending:
      timeout = min(timeout,
                    self._pending[0][2] + self._batcher.timeout - now)
    return max(timeout, 0.0)

  def _on_event(self, key: selectors.SelectorKey) -> None:
    if key.data == 'accept':
      self._accept()
    elif key.data == 'wake':
      self._drain_wake()
      for peer in self._server.take_joined():
        self._peers[peer.sock.fileno()] = peer
        self._watch(peer, selectors.EVENT_READ)
    else:
      peer = key.data
      if peer.busy or self._peers.get(peer.sock.fileno()) is not peer:
        return
      if peer.outbox is not None:
        if self._send(peer):
          self._take(peer)
      elif self._receive(peer):
        self._take(peer)
      else:
        self._forget(peer)

  def _accept(self) -> None:
    try:
      sock, address = self._listener.accept()
    except (BlockingIOError, InterruptedError):
      return
    except OSError:
      return  # close() shut the listener down.
    sock.setblocking(True)
    self._server.admit(sock, address)

  def _drain_wake(self) -> None:
    try:
      while self._wake_reader.recv(4096):
        pass
    except OSError:
      pass  # Nothing more to read.

  # --- one peer --------------------------------------------------------------

  def _watch(self, peer: Peer, events: int) -> None:
    if events and peer.events:
      self._selector.modify(peer.sock, events, peer)
    elif events:
      self._selector.register(peer.sock, events, peer)
    elif peer.events:
      self._selector.unregister(peer.sock)
    peer.events = events

  def _forget(self, peer: Peer) -> None:
    if self._peers.pop(peer.sock.fileno(), None) is not None:
      self._watch(peer, 0)
    self._server.forget_socket(peer.sock)

  def _receive(self, peer: Peer) -> bool:
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

  def _reply(self, peer: Peer, message: Any) -> bool:
    """Sends what it can of a reply; True if the peer may go on."""
    peer.outbox = reply_frame(message, self._server.max_frame_bytes)
    peer.last_progress = time.monotonic()
    return self._send(peer)

  def _send(self, peer: Peer) -> bool:
    """Sends more of the peer's reply; True once it is all sent (then the
    peer is read again)."""
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
      self._watch(peer, selectors.EVENT_WRITE)  # The rest once it reads.
      return False
    except OSError:
      self._forget(peer)  # The client went away, or close() shut it down.
      return False
    peer.outbox = None
    self._watch(peer, selectors.EVENT_READ)
    return True

  def _take(self, peer: Peer) -> None:
    """Serves, or queues for a batch, the whole requests the peer sent."""
    while True:
      request = self._next_request(peer)
      if request is None:
        return
      if request is _DROP:
        self._forget(peer)
        return
      if self._batcher is not None:
        self._pending.append((peer, request, time.monotonic()))
        peer.busy = True  # Read no more of it until it is answered.
        self._watch(peer, 0)
        return
      if not self._reply(peer, self._call(request)):
        return

  def _call(self, args: list) -> Tuple[int, Any]:
    try:
      return (OK, self._fn(*args))
    except Exception as e:  # pylint: disable=broad-except
      return (ERROR, f'{type(e).__name__}: {e}')

  # --- batches ---------------------------------------------------------------

  def _run_due_batches(self) -> None:
    if self._batcher is None:
      return
    size = self._batcher.batch_size
    while self._pending and (
        len(self._pending) >= size or
        time.monotonic() >= self._pending[0][2] + self._batcher.timeout):
      batch, self._pending = self._pending[:size], self._pending[size:]
      self._run_batch(batch)

  def _run_batch(self, batch: List[Tuple[Peer, list, float]]) -> None:
    try:
      messages = [(OK, value) for value in self._batcher.call_batch(
          [args for _, args, _ in batch])]
    except Exception as e:  # pylint: disable=broad-except
      messages = [(ERROR, f'{type(e).__name__}: {e}')] * len(batch)
    for (peer, _, _), message in zip(batch, messages):
      peer.busy = False
      if (self._peers.get(peer.sock.fileno()) is peer and
          self._reply(peer, message)):
        self._take(peer)  # A request it sent before its reply came.

  # --- framing and timeouts --------------------------------------------------

  def _next_request(self, peer: Peer):
    """The arguments of the peer's next whole request; None if it has not
    all arrived; `_DROP` if the peer must be disconnected (a frame over
    `max_frame_bytes`, or a malformed request, told its error if the
    socket takes it at once)."""
    server = self._server
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
    if not 0 <= size <= server.max_frame_bytes:
      if not server.closed:
        logging.warning('Channel %s: dropped the connection from %s: a frame '
                        'of %d bytes is over max_frame_bytes=%d.',
                        server.address, peer.name, size,
                        server.max_frame_bytes)
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
                      'closing its connection.', server.address, peer.name, e)
      try:
        peer.sock.sendmsg(
            reply_frame((ERROR, f'CodecError: {e}'), server.max_frame_bytes),
            (), socket.MSG_DONTWAIT)
      except OSError:
        pass  # It is dropped all the same.
      return _DROP
    return args

  def _stalled_or_idle(self) -> List[Peer]:
    """Peers that made no progress for read_timeout within a frame or a
    reply, or were silent for idle_timeout between requests."""
    server = self._server
    now = time.monotonic()
    found = []
    for peer in self._peers.values():
      silent = now - peer.last_progress
      if peer.busy:
        continue
      if (peer.buffer or peer.outbox) and silent > server.read_timeout:
        if not server.closed:
          logging.warning('Channel %s: dropped the connection from %s: its '
                          '%s stalled for read_timeout=%.1f s.',
                          server.address, peer.name,
                          'reply' if peer.outbox else 'request',
                          server.read_timeout)
        found.append(peer)
      elif (not peer.buffer and peer.outbox is None and
            server.idle_timeout is not None and silent > server.idle_timeout):
        found.append(peer)  # Idle for idle_timeout.
    return found
