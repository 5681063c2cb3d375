"""The gRPC side of the remote environment service (`environment.proto`).

`EnvironmentService` turns sessions of remote clients into calls of one
blocking function, `act(slot, step_type, reward, discount, observation,
mask, logged_action, logged_logits) -> (action, policy_version)`, made from a
pool of threads so that concurrent episodes can be batched behind it (see
`node.RemoteEnvironmentNode`, which plugs in SEED's inference server).

* A slot is a stream of episodes played back to back (like one environment
  of an actor): an episode takes a free slot when it starts and gives it back
  when it ends, so that at most `max_episodes` slots ever exist.
* Every call needs the shared token (`authorization: Bearer <token>`),
  compared in constant time; the first message of a session is a `Hello`
  whose specs must equal the agent's (FAILED_PRECONDITION names the field),
  sent within `hello_timeout_s` (else DEADLINE_EXCEEDED).
* Sessions: at most `max_sessions` at once (the gRPC server's cap), and at
  most `max_sessions_per_peer` from one connection (RESOURCE_EXHAUSTED), so
  one client cannot hold them all.
* A malformed message, or a value outside the agent's declared bounds
  (`validation`), ends its session with INVALID_ARGUMENT naming the field;
  it never reaches `act`.
* When a session ends (the client closed it, crashed or lost the
  connection), each of its open episodes is ended with a truncation step
  (LAST, discount 1, its last observation repeated, reward 0): the
  trajectory stays well formed.
"""

import concurrent.futures
import dataclasses
import hmac
import queue
import threading
import uuid
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from absl import logging
import grpc
import numpy as np

from repertory.remote import slots
from repertory.remote import validation
from repertory_remote import environment_pb2 as pb
from repertory_remote import wire as specs_lib

FIRST, MID, LAST = 0, 1, 2  # dm_env.StepType values
HELLO_TIMEOUT_S = 10.0
MAX_SESSIONS_PER_PEER = 8
SERVICE = 'repertory.remote.v1.EnvironmentService'
ActFn = Callable[..., Tuple[int, int]]
EpisodeFn = Callable[[float, int, bool], None]


class _Abort(Exception):
  def __init__(self, code: grpc.StatusCode, message: str):
    super().__init__(message)
    self.code = code
    self.message = message


@dataclasses.dataclass
class _Episode:
  slot: int
  observation: np.ndarray
  in_flight: Optional[concurrent.futures.Future] = None
  waiting: bool = False  # a step was sent and its action not yet
  episode_return: float = 0.0
  length: int = 0


class EnvironmentService:
  """Serves `environment.proto`'s EnvironmentService; see module doc."""

  def __init__(self, specs: specs_lib.Specs, act: ActFn, token: str,
               max_episodes: int = 256,
               on_episode_end: Optional[EpisodeFn] = None,
               on_step: Optional[Callable[[], None]] = None,
               unsupported: Optional[Dict[str, str]] = None,
               limits: Optional[validation.Limits] = None,
               hello_timeout_s: float = HELLO_TIMEOUT_S,
               max_sessions_per_peer: int = MAX_SESSIONS_PER_PEER):
    """Args:
      specs: the agent's specs; clients must declare the same.
      act: the blocking step function (see module doc).
      token: the shared secret clients must send.
      max_episodes: the most episodes open at once (over all sessions);
        a step opening one more is refused with RESOURCE_EXHAUSTED.
      on_episode_end: called with (return, length, truncated) per episode.
      on_step: called once per step that reached `act` (for counting).
      unsupported: step fields the agent refuses ('step.legal_actions',
        'step.logged') and why: a step using one gets INVALID_ARGUMENT.
      limits: the observation and reward bounds (`validation.Limits`;
        default: +-max_abs limits only).
      hello_timeout_s: a session whose Hello has not arrived this long
        after it opened is closed (DEADLINE_EXCEEDED).
      max_sessions_per_peer: the most sessions one connection (one gRPC
        channel) may hold at once.
    """
    if not token:
      raise ValueError('EnvironmentService needs a non-empty token.')
    if max_episodes < 1:
      raise ValueError(f'max_episodes must be >= 1, got {max_episodes}.')
    self.specs = specs
    self._act = act
    self._token = token.encode()
    self._slots = slots.SlotPool(max_episodes)
    self._on_episode_end = on_episode_end
    self._on_step = on_step
    self._unsupported = dict(unsupported or {})
    self._limits = limits or validation.Limits()
    self._hello_timeout_s = hello_timeout_s
    self._max_per_peer = max_sessions_per_peer
    self._peers: Dict[str, int] = {}
    self._executor = concurrent.futures.ThreadPoolExecutor(
        max_episodes, thread_name_prefix='remote-step')
    self.server_id = uuid.uuid4().hex
    self._lock = threading.Lock()
    self.num_sessions = 0
    self.num_truncated_by_disconnect = 0

  # --- serving -------------------------------------------------------------

  def handler(self) -> grpc.GenericRpcHandler:
    """The generic handler to add to a `grpc.Server`. Requests arrive as
    bytes and are parsed here, so that unparsable ones get
    INVALID_ARGUMENT."""
    return grpc.method_handlers_generic_handler(SERVICE, {
        'GetSpecs': grpc.unary_unary_rpc_method_handler(
            self._get_specs,
            response_serializer=pb.Specs.SerializeToString),
        'Session': grpc.stream_stream_rpc_method_handler(
            self._session,
            response_serializer=pb.ServerMessage.SerializeToString),
    })

  def open_episodes(self) -> int:
    return self._slots.in_use()

  def close(self) -> None:
    self._executor.shutdown(wait=False, cancel_futures=True)

  # --- handlers ------------------------------------------------------------

  def _authenticate(self, context: grpc.ServicerContext) -> None:
    sent = b''
    for key, value in context.invocation_metadata():
      if key == specs_lib.METADATA_KEY:
        text = value if isinstance(value, str) else value.decode('latin-1')
        if text.startswith('Bearer '):
          sent = text[len('Bearer '):].encode()
    if not hmac.compare_digest(sent, self._token):
      context.abort(grpc.StatusCode.UNAUTHENTICATED,
                    'missing or wrong token (metadata authorization: '
                    'Bearer <token>)')

  def _get_specs(self, request: bytes, context) -> pb.Specs:
    self._authenticate(context)
    return self.specs.to_proto()

  def _session(self, requests, context):
    self._authenticate(context)
    peer = context.peer()
    with self._lock:
      held = self._peers.get(peer, 0)
      if held < self._max_per_peer:
        self._peers[peer] = held + 1
    if held >= self._max_per_peer:
      context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f'session: this connection ({peer}) holds {held} '
                    'sessions, the most one connection may hold '
                    '(max_sessions_per_peer); end one first')
    try:
      yield from self._serve_session(requests, context, peer)
    finally:
      with self._lock:
        self._peers[peer] -= 1
        if not self._peers[peer]:
          del self._peers[peer]

  def _serve_session(self, requests, context, peer: str):
    try:
      hello = self._hello(requests)
    except _Abort as e:
      context.abort(e.code, e.message)
    with self._lock:
      self.num_sessions += 1
      session_id = f'{self.server_id[:8]}-{self.num_sessions}'
    logging.info('remote: session %s opened by %r (%s).', session_id,
                 hello.client_name, peer)
    yield pb.ServerMessage(welcome=pb.Welcome(
        session_id=session_id, specs=self.specs.to_proto(),
        server_id=self.server_id))
    out: 'queue.Queue[Any]' = queue.Queue()
    reader = threading.Thread(
        target=self._read, args=(requests, out, session_id), daemon=True,
        name=f'remote-session-{session_id}')
    reader.start()
    while True:
      item = out.get()
      if item is None:
        return
      if isinstance(item, _Abort):
        context.abort(item.code, item.message)
      yield item

  def _hello(self, requests) -> pb.Hello:
    """The session's Hello, read within `hello_timeout_s`."""
    first: 'queue.Queue[Any]' = queue.Queue()

    def read():
      try:
        first.put(next(requests))
      except StopIteration:
        first.put(None)
      except Exception as e:  # pylint: disable=broad-except  # RpcError
        first.put(e)
    threading.Thread(target=read, daemon=True, name='remote-hello').start()
    try:
      raw = first.get(timeout=self._hello_timeout_s)
    except queue.Empty:
      raise _Abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                   f'hello: no Hello within {self._hello_timeout_s:g} s of '
                   'opening the session') from None
    if raw is None or isinstance(raw, Exception):
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                   'hello: the session ended before its Hello')
    message = _parse(raw)
    if message.WhichOneof('message') != 'hello':
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                   'hello: the first message of a session must be a Hello, '
                   f'got {message.WhichOneof("message")}')
    if not message.hello.HasField('specs'):
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, 'hello.specs: missing')
    try:
      client_specs = specs_lib.Specs.from_proto(message.hello.specs,
                                                'hello.specs')
    except specs_lib.FieldError as e:
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
    problem = specs_lib.mismatch(client_specs, self.specs)
    if problem:
      raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, problem)
    return message.hello

  def _read(self, requests, out: 'queue.Queue[Any]', session_id: str) -> None:
    """Reads a session's steps until it ends; then truncates its episodes."""
    episodes: Dict[int, _Episode] = {}
    closed: Set[int] = set()
    try:
      for raw in requests:
        message = _parse(raw)
        if message.WhichOneof('message') != 'step':
          raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                       'message: only Step messages may follow the Hello, got '
                       f'{message.WhichOneof("message")}')
        self._submit(message.step, episodes, closed, out)
    except _Abort as e:
      out.put(e)
    except grpc.RpcError:
      pass  # The client went away.
    except Exception as e:  # pylint: disable=broad-except
      logging.exception('remote: session %s failed.', session_id)
      out.put(_Abort(grpc.StatusCode.INTERNAL, f'{type(e).__name__}: {e}'))
    finally:
      self._truncate(episodes, session_id)
      out.put(None)

  def _submit(self, message: pb.Step, episodes: Dict[int, _Episode],
              closed: Set[int], out: 'queue.Queue[Any]') -> None:
    """Validates one step and hands it to a worker thread."""
    if int(message.episode_id) in closed:
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                   f'step.episode_id: episode {message.episode_id} has ended; '
                   'use a new id for a new episode')
    try:
      step = validation.parse(message, self.specs, self._limits,
                              self._unsupported)
    except specs_lib.FieldError as e:
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
    episode = episodes.get(step.episode_id)
    if episode is None:
      episode = self._start_episode(step)
      episodes[step.episode_id] = episode
      step_type, reward, discount = FIRST, 0.0, 1.0
    else:
      if episode.waiting:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                     f'step.episode_id: episode {step.episode_id} sent a step '
                     'before receiving the action of its previous one')
      step_type = LAST if step.ends else MID
      reward, discount = step.reward, 0.0 if step.terminal else 1.0
      episode.observation = step.observation
      episode.episode_return += reward
      episode.length += 1
    if step.ends:
      del episodes[step.episode_id]
      closed.add(step.episode_id)
    episode.waiting = True
    episode.in_flight = self._executor.submit(
        self._step, step.episode_id, episode, step_type, reward, discount,
        step.observation, step.mask, step.logged_action, step.logged_logits,
        step.truncated, out)

  def _start_episode(self, step: validation.Step) -> _Episode:
    if step.ends:
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                   f'step.terminal: the first step of episode '
                   f'{step.episode_id} cannot end it (send its first '
                   'observation, then steps)')
    slot = self._slots.take()
    if slot is None:
      raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                   f'step.episode_id: {self._slots.size} episodes are open '
                   'on this service (its max_episodes); end one first')
    return _Episode(slot, step.observation)

  def _step(self, episode_id, episode, step_type, reward, discount,
            observation, mask, logged_action, logged_logits, truncated,
            out) -> None:
    try:
      action, version = self._act(episode.slot, step_type, reward, discount,
                                  observation, mask, logged_action,
                                  logged_logits)
    except Exception as e:  # pylint: disable=broad-except
      logging.exception('remote: act failed.')
      out.put(_Abort(grpc.StatusCode.INTERNAL, f'{type(e).__name__}: {e}'))
      return
    finally:
      episode.waiting = False
    if self._on_step is not None:
      self._on_step()
    if step_type == LAST:
      self._end(episode, truncated)
      action = -1
    elif logged_action is not None:
      action = -1
    out.put(pb.ServerMessage(action=pb.Action(
        episode_id=episode_id, action=int(action),
        policy_version=int(version))))

  def _end(self, episode: _Episode, truncated: bool) -> None:
    self._slots.give_back(episode.slot)
    if self._on_episode_end is not None:
      self._on_episode_end(episode.episode_return, episode.length, truncated)

  def _truncate(self, episodes: Dict[int, _Episode], session_id: str) -> None:
    """Ends every open episode of a finished session with a truncation."""
    if episodes:
      logging.info('remote: session %s ended with %d open episodes; they are '
                   'written as truncated.', session_id, len(episodes))
    for episode in episodes.values():
      if episode.in_flight is not None:
        try:
          episode.in_flight.result()
        except Exception:  # pylint: disable=broad-except
          pass
      try:
        self._act(episode.slot, LAST, 0.0, 1.0, episode.observation, None,
                  None, None)
      except Exception:  # pylint: disable=broad-except
        logging.exception('remote: truncating an episode failed.')
      with self._lock:
        self.num_truncated_by_disconnect += 1
      self._end(episode, True)


def _parse(raw: bytes) -> pb.ClientMessage:
  message = pb.ClientMessage()
  try:
    message.ParseFromString(raw)
  except Exception as e:  # pylint: disable=broad-except  # DecodeError
    raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                 f'message: not a ClientMessage ({e})') from None
  return message


def serve(service: EnvironmentService, host: str = '127.0.0.1',
          port: int = 0, tls: Optional[Tuple[bytes, bytes]] = None,
          max_sessions: int = 256) -> Tuple[grpc.Server, int]:
  """Starts a gRPC server for `service` on host:port (0: a free port);
  `tls` = (private key PEM, certificate chain PEM) serves TLS. Returns
  (server, port)."""
  server = grpc.server(
      concurrent.futures.ThreadPoolExecutor(
          max_sessions + 4, thread_name_prefix='remote-grpc'),
      handlers=[service.handler()],
      maximum_concurrent_rpcs=max_sessions,
      options=[('grpc.so_reuseport', 0)])
  address = f'{host}:{port}' if ':' not in host else f'[{host}]:{port}'
  if tls is None:
    bound = server.add_insecure_port(address)
  else:
    bound = server.add_secure_port(
        address, grpc.ssl_server_credentials([tls]))
  if not bound:
    raise OSError(f'remote: cannot listen on {address}.')
  server.start()
  return server, bound
