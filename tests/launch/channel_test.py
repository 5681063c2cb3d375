"""The direct TCP channel: round trips, errors, closing (the inference
server through it: server_test)."""

import threading

import numpy as np
import pytest

from repertory.launch import channel


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
