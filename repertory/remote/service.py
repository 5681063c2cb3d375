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
  whose specs must equal the agent's (FAILED_PRECONDITION names the field).
* A malformed message ends its session with INVALID_ARGUMENT naming the
  field; it never reaches `act`.
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

from repertory.remote import environment_pb2 as pb
from repertory.remote import specs as specs_lib

FIRST, MID, LAST = 0, 1, 2  # dm_env.StepType values
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


class _SlotPool:
  """Slot ids 0 .. size - 1; the lowest free one is taken first."""

  def __init__(self, size: int):
    self._free = list(range(size - 1, -1, -1))
    self._lock = threading.Lock()
    self.size = size

  def take(self) -> Optional[int]:
    with self._lock:
      if not self._free:
        return None
      self._free.sort(reverse=True)
      return self._free.pop()

  def give_back(self, slot: int) -> None:
    with self._lock:
      self._free.append(slot)

  def in_use(self) -> int:
    with self._lock:
      return self.size - len(self._free)


class EnvironmentService:
  """Serves `environment.proto`'s EnvironmentService; see module doc."""

  def __init__(self, specs: specs_lib.Specs, act: ActFn, token: str,
               max_episodes: int = 256,
               on_episode_end: Optional[EpisodeFn] = None,
               on_step: Optional[Callable[[], None]] = None,
               unsupported: Optional[Dict[str, str]] = None):
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
    """
    if not token:
      raise ValueError('EnvironmentService needs a non-empty token.')
    if max_episodes < 1:
      raise ValueError(f'max_episodes must be >= 1, got {max_episodes}.')
    self.specs = specs
    self._act = act
    self._token = token.encode()
    self._slots = _SlotPool(max_episodes)
    self._on_episode_end = on_episode_end
    self._on_step = on_step
    self._unsupported = dict(unsupported or {})
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
    try:
      hello = self._hello(requests)
    except _Abort as e:
      context.abort(e.code, e.message)
    with self._lock:
      self.num_sessions += 1
      session_id = f'{self.server_id[:8]}-{self.num_sessions}'
    logging.info('remote: session %s opened by %r (%s).', session_id,
                 hello.client_name, context.peer())
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
    try:
      raw = next(requests)
    except StopIteration:
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                   'hello: the session ended before its Hello') from None
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

  def _submit(self, step: pb.Step, episodes: Dict[int, _Episode],
              closed: Set[int], out: 'queue.Queue[Any]') -> None:
    """Validates one step and hands it to a worker thread."""
    specs = self.specs
    episode_id = int(step.episode_id)
    if episode_id in closed:
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                   f'step.episode_id: episode {episode_id} has ended; use a '
                   'new id for a new episode')
    try:
      if not step.HasField('observation'):
        raise specs_lib.FieldError('step.observation', 'missing')
      observation = specs_lib.tensor_from_proto(step.observation, specs,
                                                'step.observation')
      reward = float(step.reward)
      if not np.isfinite(reward):
        raise specs_lib.FieldError('step.reward', f'{reward} is not finite')
      if step.terminal and step.truncated:
        raise specs_lib.FieldError(
            'step.terminal', 'terminal and truncated are both set')
      mask = specs_lib.mask_from_proto(step.legal_actions, specs.num_actions,
                                       'step.legal_actions')
      for field, present in (('step.legal_actions', mask is not None),
                             ('step.logged', step.HasField('logged'))):
        if present and field in self._unsupported:
          raise specs_lib.FieldError(field, self._unsupported[field])
      logged_action, logged_logits = None, None
      if step.HasField('logged'):
        logged_action = int(step.logged.action)
        if not 0 <= logged_action < specs.num_actions:
          raise specs_lib.FieldError(
              'step.logged.action', f'{logged_action} is not in 0 .. '
              f'{specs.num_actions - 1}')
        if mask is not None and not mask[logged_action]:
          raise specs_lib.FieldError(
              'step.logged.action', f'{logged_action} is not legal under '
              'step.legal_actions')
        if len(step.logged.logits):
          logged_logits = np.asarray(step.logged.logits, np.float32)
          if logged_logits.shape != (specs.num_actions,):
            raise specs_lib.FieldError(
                'step.logged.logits', f'{len(logged_logits)} values, '
                f'expected {specs.num_actions}')
          if not np.all(np.isfinite(logged_logits)):
            raise specs_lib.FieldError('step.logged.logits',
                                       'holds NaN or infinite values')
    except specs_lib.FieldError as e:
      raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None

    episode = episodes.get(episode_id)
    ends = step.terminal or step.truncated
    if episode is None:
      if ends:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                     f'step.terminal: the first step of episode {episode_id} '
                     'cannot end it (send its first observation, then steps)')
      slot = self._slots.take()
      if slot is None:
        raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                     f'step.episode_id: {self._slots.size} episodes are open '
                     'on this service (its max_episodes); end one first')
      episode = _Episode(slot, observation)
      episodes[episode_id] = episode
      step_type, reward, discount = FIRST, 0.0, 1.0
    else:
      if episode.waiting:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                     f'step.episode_id: episode {episode_id} sent a step '
                     'before receiving the action of its previous one')
      step_type = LAST if ends else MID
      discount = 0.0 if step.terminal else 1.0
      episode.observation = observation
      episode.episode_return += reward
      episode.length += 1
    if ends:
      del episodes[episode_id]
      closed.add(episode_id)
    episode.waiting = True
    episode.in_flight = self._executor.submit(
        self._step, episode_id, episode, step_type, reward, discount,
        observation, mask, logged_action, logged_logits, bool(step.truncated),
        out)

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
