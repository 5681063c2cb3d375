"""The direct TCP channel: round trips, errors, closing, and what it refuses
(strangers, pickles, oversized frames, too many or silent peers); the
inference server through it: server_test; bind addresses: bind_test."""

from multiprocessing import connection as mp_connection
import os
import pickle
import resource
import socket
import struct
import threading

import numpy as np
import pytest

from repertory.launch.transport import batching
from repertory.launch.transport import channel
from repertory.launch.transport import codec
from repertory.launch.api import context


@pytest.fixture
def echo_server():
  calls = []

  def echo(*args):
    calls.append(args)
    if args and isinstance(args[0], str) and args[0] == 'fail':
      raise KeyError('asked to fail')
    return {'args': args, 'sum': float(np.sum(args[-1]))}

  server = channel.ChannelServer(echo)
  yield server, calls
  server.close()


def test_round_trip_of_arrays_and_nests(echo_server):
  server, calls = echo_server
  assert server.address.startswith('127.0.0.1:')
  client = channel.ChannelClient(server.address)
  observation = {'pixels': np.arange(12, dtype=np.uint8).reshape(3, 4),
                 'scalar': np.float32(2.5)}
  values = np.linspace(0.0, 1.0, 1000)
  for _ in range(3):
    reply = client.call(np.int64(7), observation, values)
  client.close()
  assert len(calls) == 3
  args = reply['args']
  assert args[0] == 7 and args[0].dtype == np.int64
  np.testing.assert_array_equal(args[1]['pixels'], observation['pixels'])
  assert args[1]['pixels'].dtype == np.uint8
  assert reply['sum'] == pytest.approx(500.0)


def test_an_error_reaches_the_caller_and_the_connection_goes_on(echo_server):
  server, _ = echo_server
  client = channel.ChannelClient(server.address)
  with pytest.raises(channel.ChannelError, match="KeyError: 'asked to fail'"):
    client.call('fail', np.zeros(1))
  assert client.call('fine', np.ones(2))['sum'] == 2.0
  client.close()


def test_close_ends_the_connections_of_waiting_clients():
  entered, release = threading.Event(), threading.Event()

  def slow(x):
    entered.set()
    release.wait(30)
    return x

  server = channel.ChannelServer(slow)
  client = channel.ChannelClient(server.address)
  errors = []

  def call():
    try:
      client.call(1)
    except (ConnectionError, OSError) as e:
      errors.append(e)

  caller = threading.Thread(target=call)
  caller.start()
  assert entered.wait(30)
  closer = threading.Thread(target=server.close)
  closer.start()
  caller.join(30)  # The client raises while the call is still running,
  assert not caller.is_alive() and len(errors) == 1
  assert closer.is_alive()  # and close() waits for that call to return.
  release.set()
  closer.join(30)
  assert not closer.is_alive()
  with pytest.raises(OSError):  # ConnectionRefusedError: nobody listens.
    channel.ChannelClient(server.address, connect_timeout=5)


@pytest.mark.parametrize('address', ['no-port', 'host:', ':123', 'h:port'])
def test_bad_address(address):
  with pytest.raises(ValueError, match='host:port'):
    channel.ChannelClient(address)


# --- Security: authentication, no pickle, frame limit, caps and timeouts. ---


class _WritesAFile:
  """Unpickling this runs `open(path, 'w')`: what an attacker would send."""

  def __init__(self, path):
    self.path = path

  def __reduce__(self):
    return (open, (self.path, 'w'))


def _read_until_closed(sock: socket.socket, timeout: float = 30.0) -> bytes:
  """What the server sends before it closes the connection (a close with
  unread data is a reset)."""
  sock.settimeout(timeout)
  received = b''
  while True:
    try:
      chunk = sock.recv(65536)
    except ConnectionResetError:
      return received
    if not chunk:
      return received
    received += chunk


@pytest.fixture
def counting_server():
  calls = []
  servers = []

  def make(**kwargs):
    server = channel.ChannelServer(lambda *a: calls.append(a) or len(calls),
                                   **kwargs)
    servers.append(server)
    return server

  yield make, calls
  for server in servers:
    server.close()


def test_a_client_without_the_key_is_refused(counting_server):
  make, calls = counting_server
  server = make(authkey=b'k' * 32)
  with pytest.raises(channel.ChannelAuthenticationError, match='same key'):
    channel.ChannelClient(server.address, authkey=b'x' * 32)
  # The program's key is not this server's either.
  with pytest.raises(channel.ChannelAuthenticationError):
    channel.ChannelClient(server.address)
  client = channel.ChannelClient(server.address, authkey=b'k' * 32)
  assert client.call('hello') == 1
  client.close()
  assert calls == [('hello',)]


@pytest.mark.parametrize('framing', ['old_channel', 'multiprocessing'])
def test_a_stranger_s_pickle_is_never_read(counting_server, tmp_path,
                                           framing):
  """The old channel's frame (8-byte length + pickle) and a
  multiprocessing.connection frame, sent without the handshake."""
  make, calls = counting_server
  server = make()
  marker = tmp_path / 'pwned'
  payload = pickle.dumps((_WritesAFile(str(marker)),), protocol=5)
  if framing == 'old_channel':
    frame = struct.pack('<Q', len(payload)) + payload
  else:
    frame = struct.pack('!i', len(payload)) + payload
  host, port = server.address.rsplit(':', 1)
  with socket.create_connection((host, int(port)), timeout=30) as sock:
    sock.sendall(frame)
    received = _read_until_closed(sock)
  # All the stranger got: the challenge, and (for a frame short enough to
  # be read as an answer) the refusal.
  assert len(received) < 100, received
  assert not marker.exists()
  assert not calls


def test_a_pickle_from_an_authenticated_peer_is_not_unpickled(
    counting_server, tmp_path):
  make, calls = counting_server
  key = os.urandom(32)
  server = make(authkey=key)
  marker = tmp_path / 'pwned'
  host, port = server.address.rsplit(':', 1)
  # multiprocessing's own client passes the handshake, then sends a pickle
  # (Connection.send pickles).
  conn = mp_connection.Client((host, int(port)), authkey=key)
  conn.send((_WritesAFile(str(marker)),))
  status, text = codec.decode(conn.recv_bytes())
  assert status == 1 and text.startswith('CodecError')
  with pytest.raises(EOFError):  # and the server closed the connection.
    conn.recv_bytes()
  conn.close()
  assert not marker.exists()
  assert not calls


def test_a_client_never_unpickles_a_reply(tmp_path):
  """A server that holds the key but replies with a pickle."""
  key = os.urandom(32)
  marker = tmp_path / 'pwned'
  with mp_connection.Listener(('127.0.0.1', 0), authkey=key) as listener:
    host, port = listener.address

    def serve():
      with listener.accept() as conn:
        conn.recv_bytes()
        conn.send((0, _WritesAFile(str(marker))))
        with pytest.raises(EOFError):
          conn.recv_bytes()  # until the client closes

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    client = channel.ChannelClient(f'{host}:{port}', authkey=key)
    with pytest.raises(ConnectionError, match='malformed reply'):
      client.call(1)
    server.join(30)
  assert not marker.exists()


def test_a_frame_over_the_limit_is_refused_before_it_is_allocated(
    counting_server):
  make, calls = counting_server
  key = os.urandom(32)
  server = make(authkey=key, max_frame_bytes=2**20)
  host, port = server.address.rsplit(':', 1)
  peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
  conn = mp_connection.Client((host, int(port)), authkey=key)
  # A header that claims 2 GiB - 1, and nothing after it.
  os.write(conn.fileno(), struct.pack('!i', 2**31 - 1))
  with pytest.raises(EOFError):  # The server hung up on the header.
    conn.recv_bytes()
  conn.close()
  peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  assert peak_after - peak_before < 100 * 1024  # not 2 GiB
  # A real frame over the server's limit (not the client's): refused.
  client = channel.ChannelClient(server.address, authkey=key,
                                 max_frame_bytes=2**23)
  with pytest.raises((ConnectionError, OSError)):
    client.call(np.zeros(2**19))  # 4 MiB
  client.close()
  # Over the client's own limit: refused before it is sent.
  client = channel.ChannelClient(server.address, authkey=key,
                                 max_frame_bytes=2**20)
  with pytest.raises(ValueError, match='max_frame_bytes'):
    client.call(np.zeros(2**18))  # 2 MiB
  assert client.call(np.zeros(2**16)) == 1  # 512 KiB: served.
  client.close()
  assert len(calls) == 1


def test_the_connection_cap(counting_server):
  make, _ = counting_server
  server = make(max_connections=2)
  first = channel.ChannelClient(server.address)
  second = channel.ChannelClient(server.address)
  with pytest.raises(ConnectionError, match='max_connections'):
    channel.ChannelClient(server.address)
  assert first.call() == 1 and second.call() == 2
  first.close()
  for _ in range(300):  # The server frees the slot once it sees the close.
    try:
      third = channel.ChannelClient(server.address)
      break
    except ConnectionError:
      threading.Event().wait(0.1)
  assert third.call() == 3
  third.close()
  second.close()


def test_a_silent_peer_is_dropped_and_does_not_block_others(counting_server):
  make, _ = counting_server
  key = os.urandom(32)
  server = make(authkey=key, read_timeout=0.5)
  host, port = server.address.rsplit(':', 1)
  with socket.create_connection((host, int(port)), timeout=30) as silent:
    # Meanwhile an honest client connects and calls.
    client = channel.ChannelClient(server.address, authkey=key)
    assert client.call() == 1
    challenge = _read_until_closed(silent)  # dropped after read_timeout
  assert challenge.startswith(struct.pack('!i', len(challenge) - 4))
  # A peer that authenticates, then stalls in the middle of a frame.
  conn = mp_connection.Client((host, int(port)), authkey=key)
  os.write(conn.fileno(), struct.pack('!i', 100) + b'x' * 10)
  with pytest.raises(EOFError):
    conn.recv_bytes()
  conn.close()
  # An authenticated connection may idle between calls (idle_timeout=None).
  threading.Event().wait(1.0)
  assert client.call() == 2
  client.close()


def test_objects_that_are_not_data_do_not_travel(echo_server):
  server, calls = echo_server
  client = channel.ChannelClient(server.address)
  with pytest.raises(TypeError, match='cannot carry an object of type'):
    client.call(object())
  with pytest.raises(TypeError, match='object or structured'):
    client.call(np.array([1, None]))
  # Nothing was sent: the connection goes on.
  assert client.call('fine', np.ones(2))['sum'] == 2.0
  client.close()
  assert len(calls) == 1


def _still_connected(sock: socket.socket) -> bool:
  """True while the server has neither closed nor reset `sock`."""
  sock.setblocking(False)
  try:
    return bool(sock.recv(1, socket.MSG_PEEK))
  except BlockingIOError:
    return True
  except OSError:
    return False
  finally:
    sock.setblocking(True)


def test_a_peer_stalled_in_a_frame_does_not_delay_the_others(counting_server):
  make, _ = counting_server
  key = os.urandom(32)
  server = make(authkey=key, read_timeout=60)
  host, port = server.address.rsplit(':', 1)
  stalled = mp_connection.Client((host, int(port)), authkey=key)
  os.write(stalled.fileno(), struct.pack('!i', 100) + b'x' * 10)
  client = channel.ChannelClient(server.address, authkey=key)
  # Served while the stalled frame waits (one serving thread never blocks
  # on a peer): the stalled peer is still connected afterwards.
  assert [client.call() for _ in range(3)] == [1, 2, 3]
  with socket.socket(fileno=os.dup(stalled.fileno())) as sock:
    assert _still_connected(sock)
  stalled.close()
  client.close()


def _frames(*requests) -> bytes:
  return b''.join(struct.pack('!i', len(f)) + f
                  for f in (codec.encode(list(r)) for r in requests))


def test_requests_sent_back_to_back_are_each_answered(echo_server):
  server, calls = echo_server
  host, port = server.address.rsplit(':', 1)
  conn = mp_connection.Client((host, int(port)),
                              authkey=context.channel_key())
  os.write(conn.fileno(), _frames(('a', np.ones(1)), ('b', np.ones(2)),
                                  ('c', np.ones(3))))
  sums = [codec.decode(conn.recv_bytes())[1]['sum'] for _ in range(3)]
  conn.close()
  assert sums == [1.0, 2.0, 3.0]
  assert [c[0] for c in calls] == ['a', 'b', 'c']


def _batched_server(batch_size, timeout, fail=False):
  batches = []

  def double(x):
    batches.append(len(x))
    if fail:
      raise KeyError('the batch failed')
    return x * 2

  fn = batching.batched_handler(batch_size, timeout=timeout)(double)
  return channel.ChannelServer(fn), batches


def test_ready_requests_of_a_batched_handler_run_as_one_batch():
  # A timeout far longer than the test: a batch runs only once full.
  server, batches = _batched_server(4, timeout=600.0)
  clients = [channel.ChannelClient(server.address) for _ in range(4)]
  for i, client in enumerate(clients):
    client.send(np.full(3, i))
  replies = [client.receive() for client in clients]
  for i, reply in enumerate(replies):
    np.testing.assert_array_equal(reply, np.full(3, 2 * i))
  assert batches == [4]
  for client in clients:
    client.close()
  server.close()


def test_a_partial_batch_runs_after_the_timeout():
  server, batches = _batched_server(4, timeout=0.05)
  client = channel.ChannelClient(server.address)
  np.testing.assert_array_equal(client.call(np.arange(2)), [0, 2])
  assert batches == [1]
  client.close()
  server.close()


def test_with_no_timeout_a_batch_is_the_requests_that_are_ready():
  # SEED's default: a lone request runs at once (no caller waits for the
  # others); requests that arrive while a batch runs make the next batch.
  batches, running, release = [], threading.Event(), threading.Event()
  release.set()

  def double(x):
    batches.append(len(x))
    running.set()
    assert release.wait(60.0)
    return x * 2

  server = channel.ChannelServer(
      batching.batched_handler(4, timeout=0.0)(double))
  clients = [channel.ChannelClient(server.address) for _ in range(3)]
  for client in clients:  # Each connection served once: all joined.
    np.testing.assert_array_equal(client.call(np.zeros(1)), [0.0])
  batches.clear()
  running.clear()
  release.clear()
  clients[0].send(np.ones(1))
  assert running.wait(60.0)  # A batch of one, the others connected.
  clients[1].send(np.full(1, 2.0))
  clients[2].send(np.full(1, 3.0))
  release.set()
  for i, client in enumerate(clients):
    np.testing.assert_array_equal(client.receive(), [2.0 * (i + 1)])
  assert batches == [1, 2]
  for client in clients:
    client.close()
  server.close()


def test_a_batch_s_error_reaches_every_caller_of_the_batch():
  server, batches = _batched_server(2, timeout=600.0, fail=True)
  clients = [channel.ChannelClient(server.address) for _ in range(2)]
  for client in clients:
    client.send(np.ones(1))
  for client in clients:
    with pytest.raises(channel.ChannelError, match='the batch failed'):
      client.receive()
  assert batches == [2]
  for client in clients:  # The connections go on.
    client.send(np.ones(1))
  for client in clients:
    with pytest.raises(channel.ChannelError):
      client.receive()
    client.close()
  server.close()


def test_an_idle_connection_is_closed_after_idle_timeout(counting_server):
  make, _ = counting_server
  server = make(idle_timeout=0.2)
  client = channel.ChannelClient(server.address)
  assert client.call() == 1
  threading.Event().wait(2.0)
  with pytest.raises((ConnectionError, OSError)):
    client.call()
  client.close()


@pytest.mark.parametrize('idle_timeout', [0, -1.0])
def test_a_bad_idle_timeout_is_refused(idle_timeout):
  with pytest.raises(ValueError, match='idle_timeout must be None or > 0'):
    channel.ChannelServer(lambda: None, idle_timeout=idle_timeout)


def test_a_peer_slow_to_read_its_reply_does_not_delay_the_others():
  big = np.arange(2**21, dtype=np.float64)  # 16 MiB: over a socket buffer.
  server = channel.ChannelServer(lambda what: big if what == 'big' else 1)
  host, port = server.address.rsplit(':', 1)
  slow = mp_connection.Client((host, int(port)),
                              authkey=context.channel_key())
  slow.send_bytes(codec.encode(['big']))
  client = channel.ChannelClient(server.address)
  # Served while the big reply waits for its reader.
  assert [client.call('small') for _ in range(3)] == [1, 1, 1]
  status, value = codec.decode(slow.recv_bytes())
  assert status == 0
  np.testing.assert_array_equal(value, big)
  slow.close()
  client.close()
  server.close()
