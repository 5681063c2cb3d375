"""Doors of the channel that close: one deadline for a whole handshake,
peers that never authenticate cannot hold every slot, and a short message
never decodes into a large array."""

import os
import socket
import struct
import threading
import time

import msgpack
import numpy as np
import pytest

from repertory.launch.transport import channel
from repertory.launch.transport import codec

_KEY = os.urandom(32)


@pytest.fixture
def server():
  calls = []
  servers = []

  def make(**kwargs):
    made = channel.ChannelServer(lambda *a: calls.append(a) or len(calls),
                                 authkey=_KEY, **kwargs)
    servers.append(made)
    return made

  yield make
  for made in servers:
    made.close()


class _Drippers:
  """Peers that connect and send one byte every `period` seconds, for
  ever, never authenticating; `closed_after` records when the server
  closed each."""

  def __init__(self, address: str, count: int, period: float):
    host, port = address.rsplit(':', 1)
    self.closed_after = []
    self._stop = threading.Event()
    self._lock = threading.Lock()
    self._threads = [threading.Thread(target=self._drip,
                                      args=(host, int(port), period),
                                      daemon=True) for _ in range(count)]
    for thread in self._threads:
      thread.start()

  def _drip(self, host: str, port: int, period: float) -> None:
    start = time.monotonic()
    with socket.create_connection((host, port), timeout=60) as sock:
      while not self._stop.wait(period):
        try:
          sock.sendall(b'x')
        except OSError:
          break  # The server closed it.
        sock.settimeout(0.0)
        try:
          if sock.recv(4096, socket.MSG_PEEK) == b'':
            break
        except BlockingIOError:
          pass
        except OSError:
          break
    with self._lock:
      self.closed_after.append(time.monotonic() - start)

  def stop(self) -> None:
    self._stop.set()
    for thread in self._threads:
      thread.join(10)


def test_a_handshake_has_one_deadline_however_slowly_the_peer_drips(server):
  # Each byte comes well within the per-read limit; the whole handshake
  # must still end at handshake_timeout.
  made = server(read_timeout=30.0, handshake_timeout=1.0)
  drippers = _Drippers(made.address, count=3, period=0.2)
  deadline = time.monotonic() + 20
  while len(drippers.closed_after) < 3 and time.monotonic() < deadline:
    time.sleep(0.1)
  drippers.stop()
  assert len(drippers.closed_after) == 3
  assert max(drippers.closed_after) < 5.0, drippers.closed_after


def test_a_keyed_peer_is_served_while_slow_drippers_fill_every_slot(server):
  # More drippers than handshake slots and than connection slots, each
  # well inside every deadline: under a per-read timeout they would hold
  # the door for ever.
  made = server(max_connections=8, max_handshakes=4, handshake_timeout=60.0,
                read_timeout=60.0)
  drippers = _Drippers(made.address, count=16, period=0.2)
  try:
    # Every dripper has connected (the first 4 hold the handshake slots,
    # older than a second by now).
    time.sleep(1.5)
    for i in range(3):  # A restarted keyed node, again and again.
      client = channel.ChannelClient(made.address, authkey=_KEY,
                                     connect_timeout=10)
      assert client.call('hello') == i + 1
      client.close()
  finally:
    drippers.stop()


def test_handshake_settings_are_checked(server):
  with pytest.raises(ValueError, match='max_handshakes'):
    server(max_handshakes=0)
  with pytest.raises(ValueError, match='handshake_timeout'):
    server(handshake_timeout=-1.0)


def _array_ext(dtype: str, shape, data: bytes = b'') -> bytes:
  text = dtype.encode()
  payload = (bytes((len(text),)) + text + bytes((len(shape),)) +
             struct.pack(f'<{len(shape)}q', *shape) + data)
  return msgpack.packb(msgpack.ExtType(1, payload))


@pytest.mark.parametrize('dtype', ['|S0', '<U0'])
def test_a_short_message_never_decodes_into_a_large_array(dtype):
  message = _array_ext(dtype, (2**32,))
  assert len(message) < 40
  with pytest.raises(codec.CodecError, match='0 bytes'):
    codec.decode(message)


def test_an_empty_array_of_a_huge_shape_is_refused_or_empty():
  try:
    array = codec.decode(_array_ext('<f4', (0, 2**40, 2**40)))
  except codec.CodecError:
    return
  assert array.nbytes == 0
