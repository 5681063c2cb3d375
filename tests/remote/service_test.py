"""The gRPC service with a plain rule as its `act` (no TensorFlow): the
handshake, the token, field-naming errors for malformed messages, episodes
multiplexed on a session, loopback binding, and the client library's
TensorFlow-free import."""

import socket
import subprocess
import sys
import textwrap
import threading
import time

import grpc
import numpy as np
import pytest

from repertory.remote import service as service_lib
from repertory_remote import client as client_lib
from repertory_remote import environment_pb2 as pb
from repertory_remote import wire as specs_lib

SPECS = specs_lib.Specs((10, 5), 'float32', 3)
TOKEN = 'test-token'


class Recorder:
  """act: follows the ball (a real rule for Catch); records every call."""

  def __init__(self):
    self.calls = []
    self.lock = threading.Lock()
    self.delay = 0.0  # seconds each call takes

  def __call__(self, slot, step_type, reward, discount, observation, mask,
               logged_action, logged_logits):
    with self.lock:
      self.calls.append((slot, step_type, reward, discount,
                         observation.copy(), mask, logged_action))
    time.sleep(self.delay)
    ball = int(np.argmax(observation[:-1].max(axis=0)))
    paddle = int(np.argmax(observation[-1]))
    return int(np.sign(ball - paddle) + 1), 3


@pytest.fixture
def served():
  recorder = Recorder()
  ended = []
  service = service_lib.EnvironmentService(
      SPECS, recorder, TOKEN, max_episodes=4,
      on_episode_end=lambda r, n, t: ended.append((r, n, t)))
  server, port = service_lib.serve(service)
  yield f'127.0.0.1:{port}', service, recorder, ended
  server.stop(grace=None)
  service.close()


def _board(ball=(0, 1), paddle=2):
  board = np.zeros((10, 5), np.float32)
  board[ball] = 1.0
  board[9, paddle] = 1.0
  return board


def _raw_session(address, messages, token=TOKEN):
  """Sends raw byte messages on a Session; returns (answers, error)."""
  channel = grpc.insecure_channel(address)
  call = channel.stream_stream(
      '/repertory.remote.v1.EnvironmentService/Session',
      request_serializer=lambda b: b,
      response_deserializer=pb.ServerMessage.FromString)
  answers = []
  try:
    for answer in call(iter(messages), metadata=(
        ('authorization', f'Bearer {token}'),), timeout=30):
      answers.append(answer)
    return answers, None
  except grpc.RpcError as e:
    return answers, e
  finally:
    channel.close()


def _hello(specs=SPECS):
  return pb.ClientMessage(hello=pb.Hello(specs=specs.to_proto()))


def _step(episode_id, observation=None, **fields):
  observation = _board() if observation is None else observation
  return pb.ClientMessage(step=pb.Step(
      episode_id=episode_id,
      observation=specs_lib.tensor_to_proto(observation, 'float32'),
      **fields))


def test_plays_episodes_and_ends_them(served):
  address, service, recorder, ended = served
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    episode = client.episode()
    assert episode.step(_board(ball=(0, 4), paddle=2)) == 2  # Move right.
    assert episode.step(_board(ball=(1, 0), paddle=2), reward=0.0) == 0
    assert episode.step(_board(), reward=1.0, terminal=True) is None
    assert episode.policy_version == 3
  step_types = [c[1] for c in recorder.calls]
  assert step_types == [service_lib.FIRST, service_lib.MID, service_lib.LAST]
  assert [c[3] for c in recorder.calls] == [1.0, 1.0, 0.0]  # Terminal: 0.
  assert ended == [(1.0, 2, False)]
  assert service.open_episodes() == 0


def test_truncated_step_keeps_the_discount(served):
  address, _, recorder, ended = served
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    episode = client.episode()
    episode.step(_board())
    episode.step(_board(), reward=0.5, truncated=True)
  assert recorder.calls[-1][1:4] == (service_lib.LAST, 0.5, 1.0)
  assert ended == [(0.5, 1, True)]


def test_concurrent_episodes_share_a_session_and_get_their_own_actions(
    served):
  address, service, recorder, _ = served
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    episodes = [client.episode() for _ in range(3)]
    results = {}

    def play(i, episode):
      # Ball in column i, paddle in column 2: the rule moves towards i.
      results[i] = [episode.step(_board(ball=(t, i)), reward=0.0)
                    for t in range(5)]

    threads = [threading.Thread(target=play, args=(i, e))
               for i, e in enumerate(episodes)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
    assert results == {0: [0] * 5, 1: [0] * 5, 2: [1] * 5}
    assert service.num_sessions == 1
    assert len({c[0] for c in recorder.calls}) == 3  # One slot per episode.
    assert service.open_episodes() == 3
  # Closing the session truncates the three open episodes.
  deadline_calls = [c for c in recorder.calls if c[1] == service_lib.LAST]
  for _ in range(100):
    if service.open_episodes() == 0:
      break
    threading.Event().wait(0.05)
  deadline_calls = [c for c in recorder.calls if c[1] == service_lib.LAST]
  assert len(deadline_calls) == 3
  assert all(c[2] == 0.0 and c[3] == 1.0 for c in deadline_calls)
  assert service.num_truncated_by_disconnect == 3


def test_legal_mask_and_logged_action_reach_act(served):
  address, _, recorder, _ = served
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    episode = client.episode()
    episode.step(_board(), legal_actions=[True, False, True])
    assert episode.step(_board(), logged_action=1) is None
  np.testing.assert_array_equal(recorder.calls[0][5], [True, False, True])
  assert recorder.calls[1][6] == 1


@pytest.mark.parametrize('field, client_specs', [
    ('hello.specs.observation.shape',
     specs_lib.Specs((10, 4), 'float32', 3)),
    ('hello.specs.observation.dtype', specs_lib.Specs((10, 5), 'uint8', 3)),
    ('hello.specs.num_actions', specs_lib.Specs((10, 5), 'float32', 4)),
])
def test_handshake_refuses_other_specs_naming_the_field(served, field,
                                                        client_specs):
  address = served[0]
  client = client_lib.Client(address, client_specs, token=TOKEN)
  with pytest.raises(client_lib.RemoteError, match=field) as error:
    client.episode()
  assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
  client.close()


@pytest.mark.parametrize('token', ['', 'test-tokeN', 'x' * 64])
def test_wrong_or_missing_token_is_unauthenticated(served, token):
  address = served[0]
  _, error = _raw_session(address, [_hello().SerializeToString()],
                          token=token)
  assert error.code() == grpc.StatusCode.UNAUTHENTICATED
  channel = grpc.insecure_channel(address)
  get_specs = channel.unary_unary(
      '/repertory.remote.v1.EnvironmentService/GetSpecs',
      request_serializer=lambda b: b,
      response_deserializer=pb.Specs.FromString)
  with pytest.raises(grpc.RpcError) as e:
    get_specs(b'', metadata=(('authorization', f'Bearer {token}'),))
  assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
  channel.close()


def test_get_specs(served):
  client = client_lib.Client(served[0], SPECS, token=TOKEN)
  assert client.agent_specs() == SPECS
  client.close()


def _nan_board():
  board = _board()
  board[3, 3] = np.nan
  return board


@pytest.mark.parametrize('messages, field', [
    ([b'\xff\xff\xff'], 'message: not a ClientMessage'),
    ([_step(1).SerializeToString()], 'hello: the first message'),
    ([pb.ClientMessage(hello=pb.Hello()).SerializeToString()], 'hello.specs'),
    ([_hello().SerializeToString(), b'\x12\x05garbage'], 'message'),
    ([_hello().SerializeToString(),
      pb.ClientMessage(step=pb.Step(episode_id=1)).SerializeToString()],
     'step.observation: missing'),
    ([_hello().SerializeToString(),
      pb.ClientMessage(step=pb.Step(episode_id=1, observation=pb.Tensor(
          values=[0.0] * 49))).SerializeToString()],
     'step.observation.values: 49 values, expected 50'),
    ([_hello().SerializeToString(),
      pb.ClientMessage(step=pb.Step(episode_id=1, observation=pb.Tensor(
          data=b'\x00' * 12))).SerializeToString()],
     'step.observation.data: 12 bytes, expected 200'),
    ([_hello().SerializeToString(),
      _step(1, _nan_board()).SerializeToString()],
     'step.observation: holds NaN'),
    ([_hello().SerializeToString(),
      _step(1, reward=float('inf')).SerializeToString()], 'step.reward'),
    ([_hello().SerializeToString(), _step(1, terminal=True,
                                          truncated=True).SerializeToString()],
     'step.terminal: terminal and truncated'),
    ([_hello().SerializeToString(),
      _step(1, terminal=True).SerializeToString()],
     'step.terminal: the first step of episode 1'),
    ([_hello().SerializeToString(),
      _step(1, legal_actions=[True]).SerializeToString()],
     'step.legal_actions: 1 values, expected 3'),
    ([_hello().SerializeToString(),
      _step(1, legal_actions=[False] * 3).SerializeToString()],
     'step.legal_actions: no action is legal'),
    ([_hello().SerializeToString(),
      _step(1, logged=pb.LoggedAction(action=3)).SerializeToString()],
     'step.logged.action: 3 is not in 0 .. 2'),
    ([_hello().SerializeToString(),
      _step(1, logged=pb.LoggedAction(action=1, logits=[0.0])
            ).SerializeToString()],
     'step.logged.logits: 1 values, expected 3'),
    ([_hello().SerializeToString(),
      _step(1, legal_actions=[True, False, True],
            logged=pb.LoggedAction(action=1)).SerializeToString()],
     'step.logged.action: 1 is not legal'),
])
def test_malformed_messages_get_invalid_argument_naming_the_field(
    served, messages, field):
  address, service, recorder, _ = served
  _, error = _raw_session(address, messages)
  assert error is not None
  assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
  assert field in error.details()
  assert not recorder.calls  # Nothing malformed reached `act`.
  # The service still serves.
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    assert client.episode().step(_board()) in (0, 1, 2)


def test_a_step_before_the_previous_action_is_refused(served):
  address, _, recorder, _ = served
  recorder.delay = 1.0  # The first step's action comes after the second.
  _, error = _raw_session(address, [
      _hello().SerializeToString(), _step(1).SerializeToString(),
      _step(1).SerializeToString()])
  assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
  assert 'step.episode_id: episode 1 sent a step before' in error.details()
  assert len(recorder.calls) <= 2  # The first step, its truncation.


def test_reusing_an_ended_episode_id_is_refused(served):
  address = served[0]
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    episode = client.episode()
    episode.step(_board())
    episode.step(_board(), reward=1.0, terminal=True)
    again = client_lib.Episode(client, client._session, episode.episode_id)  # pylint: disable=protected-access
    with pytest.raises(client_lib.RemoteError,
                       match='step.episode_id: episode 1 has ended') as e:
      again.step(_board())
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_more_episodes_than_max_episodes_is_resource_exhausted(served):
  address = served[0]
  with client_lib.Client(address, SPECS, token=TOKEN) as client:
    for _ in range(4):
      client.episode().step(_board())
    with pytest.raises(client_lib.RemoteError, match='max_episodes') as e:
      client.episode().step(_board())
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def _outward_address():
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    try:
      s.connect(('10.255.255.255', 1))  # No packet is sent (UDP).
      return s.getsockname()[0]
    except OSError:
      return None


def test_binds_loopback_only(served):
  address = served[0]
  port = int(address.rsplit(':', 1)[1])
  outward = _outward_address()
  if outward is None or outward.startswith('127.'):
    pytest.skip('this machine has no non-loopback IPv4 address to try')
  with pytest.raises(OSError):
    socket.create_connection((outward, port), timeout=5).close()


def test_client_library_imports_no_tensorflow():
  code = textwrap.dedent('''
      import sys
      from repertory_remote import client, catch_client
      loaded = sorted(m for m in sys.modules
                      if m.split('.')[0] in ('tensorflow', 'sonnet', 'reverb',
                                             'ray'))
      print('LOADED', loaded)
  ''')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  assert 'LOADED []' in result.stdout
