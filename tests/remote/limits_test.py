"""What one client may hold and send: the service's limits, with a real gRPC
server and client processes (Python and Node.js).

* A session that sends no Hello is closed after the Hello timeout.
* One connection holds at most `max_sessions_per_peer` sessions, so streams
  that never say Hello cannot lock other clients out.
* Observations outside the spec's bounds and rewards outside the reward
  limit are refused with INVALID_ARGUMENT naming the field, before `act`.
* The example clients end within seconds of `--seconds`, even when the
  service has gone away and they would otherwise keep reconnecting.
"""

import os
import threading
import time

from dm_env import specs as dm_specs
import grpc
import numpy as np
import pytest

from repertory.remote import service as service_lib
from repertory.remote import validation
from repertory_remote import client as client_lib
from repertory_remote import environment_pb2 as pb
from repertory_remote import wire

SPECS = wire.Specs((10, 5), 'float32', 3)
TOKEN = 'limits-token'
SESSION = '/repertory.remote.v1.EnvironmentService/Session'
# Catch's declared observation spec: a board of zeros and ones.
BOARD_SPEC = dm_specs.BoundedArray((10, 5), np.float32, 0.0, 1.0)


class FollowBall:
  """act: follows the ball; records every reward it is given."""

  def __init__(self):
    self.rewards = []
    self.lock = threading.Lock()

  def __call__(self, slot, step_type, reward, discount, observation, *_):
    with self.lock:
      self.rewards.append(float(reward))
    ball = int(np.argmax(observation[:-1].max(axis=0)))
    paddle = int(np.argmax(observation[-1]))
    return int(np.sign(ball - paddle) + 1), 1


def _serve(tmp_path, **kwargs):
  act = FollowBall()
  service = service_lib.EnvironmentService(
      SPECS, act, TOKEN, max_episodes=16,
      limits=validation.Limits.from_dm_env(BOARD_SPEC, max_abs_reward=10.0),
      **kwargs)
  server, port = service_lib.serve(service, max_sessions=16)
  address_file = os.path.join(tmp_path, 'address')
  with open(address_file, 'w') as f:
    f.write(f'127.0.0.1:{port}\n')
  return service, server, act, address_file, f'127.0.0.1:{port}'


@pytest.fixture
def served(tmp_path):
  service, server, act, address_file, address = _serve(
      str(tmp_path), hello_timeout_s=2.0, max_sessions_per_peer=4)
  yield address, act, address_file
  server.stop(grace=None)
  service.close()


def _board(ball=(0, 1), paddle=2):
  board = np.zeros((10, 5), np.float32)
  board[ball] = 1.0
  board[9, paddle] = 1.0
  return board


def _open_silent_streams(channel, count):
  """`count` authenticated Session streams on one channel that never send
  anything; returns (calls, their request-ending events)."""
  call = channel.stream_stream(SESSION, request_serializer=lambda b: b,
                               response_deserializer=pb.ServerMessage.FromString)
  calls, stops = [], []
  for _ in range(count):
    stop = threading.Event()

    def silence(stop=stop):
      stop.wait()
      return
      yield  # pylint: disable=unreachable
    calls.append(call(silence(), metadata=(('authorization',
                                            f'Bearer {TOKEN}'),)))
    stops.append(stop)
  return calls, stops


def _statuses(calls, timeout):
  """The (code, details) each streaming call ended with within `timeout`
  (None for one still open), read in parallel."""
  results = [(None, '')] * len(calls)

  def read(i, call):
    try:
      for _ in call:
        pass
      results[i] = (grpc.StatusCode.OK, '')
    except grpc.RpcError as e:
      results[i] = (e.code(), e.details())
  threads = [threading.Thread(target=read, args=(i, c), daemon=True)
             for i, c in enumerate(calls)]
  for thread in threads:
    thread.start()
  deadline = time.monotonic() + timeout
  for thread in threads:
    thread.join(max(deadline - time.monotonic(), 0.0))
  return list(results)


def test_a_session_without_hello_is_closed_after_the_timeout(served):
  address = served[0]
  channel = grpc.insecure_channel(address)
  calls, stops = _open_silent_streams(channel, 1)
  start = time.monotonic()
  [(code, details)] = _statuses(calls, timeout=15)
  took = time.monotonic() - start
  assert code == grpc.StatusCode.DEADLINE_EXCEEDED, (code, details)
  assert 'hello: no Hello within 2 s' in details
  assert 1.5 < took < 8, took
  for stop in stops:
    stop.set()
  channel.close()


def test_silent_streams_of_one_client_cannot_lock_out_another(tmp_path,
                                                              clients):
  service, server, _, address_file, address = _serve(
      str(tmp_path), hello_timeout_s=120.0, max_sessions_per_peer=4)
  channel = grpc.insecure_channel(address)
  # 16 streams (the server's whole session cap) from one connection: only
  # max_sessions_per_peer=4 are held, the others are refused at once.
  calls, stops = _open_silent_streams(channel, 16)
  ends = _statuses(calls, timeout=3)
  exhausted = [d for c, d in ends if c == grpc.StatusCode.RESOURCE_EXHAUSTED]
  assert len(exhausted) == 12, ends
  assert 'max_sessions_per_peer' in exhausted[0]
  # Another client process plays while the four silent streams are open.
  player = clients.python_client(address_file, TOKEN, '--seconds=3',
                                 '--threads=2')
  summary = clients.summary(player, timeout=60)
  assert summary['episodes'] > 0 and summary['connects'] == 1, summary
  assert sum(not call.done() for call in calls) == 4  # Still held.
  for stop in stops:
    stop.set()
  channel.close()
  server.stop(grace=None)
  service.close()


def test_an_observation_outside_the_spec_bounds_is_refused(served):
  address, act, _ = served
  for value, shown in ((3e38, '3e+38'), (2.0, '2')):
    board = _board()
    board[4, 2] = value
    with client_lib.Client(address, SPECS, token=TOKEN) as client:
      with pytest.raises(client_lib.RemoteError) as e:
        client.episode().step(board)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (f'step.observation: {shown} at index [4, 2] is outside [0, 1]'
            in e.value.details), e.value.details
  assert not act.rewards  # Nothing reached the agent.


def test_rewards_outside_the_limit_never_reach_the_agent(served):
  """40 episodes ending with reward 1e30 (what reset training before): each
  is refused naming step.reward; the agent sees no reward beyond the
  limit, so its updates cannot overflow."""
  address, act, _ = served
  refused = 0
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    for _ in range(40):
      episode = client.episode()
      action = episode.step(_board())
      assert action in (0, 1, 2)
      try:
        episode.step(_board(), reward=1e30, terminal=True)
      except client_lib.RemoteError as e:
        assert e.code == grpc.StatusCode.INVALID_ARGUMENT
        assert 'step.reward: 1e+30 is outside [-10, 10]' in e.details
        refused += 1
    episode = client.episode()  # A reward inside the limit is taken.
    episode.step(_board())
    episode.step(_board(), reward=10.0, terminal=True)
  assert refused == 40
  assert max(abs(r) for r in act.rewards) == 10.0


@pytest.mark.parametrize('kind', ['python', 'node'])
def test_clients_stop_within_seconds_of_their_deadline(tmp_path, clients,
                                                       kind):
  """The service goes away 4 s into an 8 s client run: the client keeps
  retrying to reconnect (its reconnect timeout is 120 s) but ends at its
  deadline, not one reconnect timeout per thread later."""
  if kind == 'node':
    clients.require_node()
  service, server, _, address_file, _ = _serve(str(tmp_path))
  start = time.monotonic()
  if kind == 'python':
    player = clients.python_client(address_file, TOKEN, '--seconds=8',
                                   '--threads=4', '--connect_timeout=120')
  else:
    player = clients.node_client(address_file, TOKEN, '--seconds=8',
                                 '--concurrent=4')
  time.sleep(4.0)  # Time for a client process to start and play, loaded.
  server.stop(grace=None)
  service.close()
  summary = clients.summary(player, timeout=120)
  took = time.monotonic() - start
  assert summary['episodes'] > 0, summary
  assert took < 8 + 5, f'the {kind} client ran {took:.1f} s for --seconds=8'
