"""A Python client of the remote environment service; needs only grpcio,
protobuf and numpy (no TensorFlow, no repertory server code).

```python
import repertory_remote as remote

agent = remote.Client('127.0.0.1:50051', token='...',
                      specs=remote.Specs((10, 5), 'float32', 3))
while True:
  episode = agent.episode()          # reconnects if the service restarted
  observation = game.reset()
  action = episode.step(observation)  # the first step starts the episode
  while True:
    observation, reward, done = game.step(action)
    if done:
      episode.step(observation, reward, terminal=True)
      break
    action = episode.step(observation, reward)
```

One `Client` holds one gRPC session; any number of episodes (from any
threads) share it. When the session is lost (the service restarted, the
network failed) the steps of its open episodes raise `SessionLost`; the
next `episode()` opens a new session (retrying for `connect_timeout_s`, or
the `timeout_s` it is given: every thread waiting for that connection gives
up at its own deadline). A refused handshake (wrong token, other specs)
raises `RemoteError` with the gRPC status and the service's message at once.
"""

import itertools
import os
import queue
import threading
import time
from typing import Any, Dict, Iterator, Optional, Sequence

import grpc
import numpy as np

from repertory_remote import environment_pb2 as pb
from repertory_remote import wire as specs_lib

Specs = specs_lib.Specs
_METHOD = '/repertory.remote.v1.EnvironmentService/'
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
              grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN,
              grpc.StatusCode.INTERNAL)


class RemoteError(RuntimeError):
  """The service refused something; `code` is the gRPC status code."""

  def __init__(self, code: Optional[grpc.StatusCode], message: str):
    super().__init__(f'{code.name if code else "ERROR"}: {message}')
    self.code = code
    self.details = message


class SessionLost(RemoteError):
  """The session of an episode ended (service restart, network failure):
  start a new episode."""


class _Session:
  """One Session stream: sends from a queue, routes answers by episode."""

  def __init__(self, channel: grpc.Channel, metadata, hello: pb.Hello,
               timeout_s: float):
    self._requests: 'queue.Queue[Optional[bytes]]' = queue.Queue()
    self._waiters: Dict[int, 'queue.Queue[Any]'] = {}
    self._lock = threading.Lock()
    self.error: Optional[RemoteError] = None
    call = channel.stream_stream(
        _METHOD + 'Session',
        request_serializer=lambda b: b,
        response_deserializer=pb.ServerMessage.FromString)
    self._requests.put(pb.ClientMessage(hello=hello).SerializeToString())
    self._call = call(self._iterate(), metadata=metadata)
    welcome = _first(self._call, timeout_s)
    if welcome.WhichOneof('message') != 'welcome':
      raise RemoteError(None, f'expected a Welcome, got {welcome}')
    self.welcome = welcome.welcome
    self._reader = threading.Thread(target=self._read, daemon=True,
                                    name='repertory-remote-session')
    self._reader.start()

  def _iterate(self) -> Iterator[bytes]:
    while True:
      item = self._requests.get()
      if item is None:
        return
      yield item

  def _read(self) -> None:
    try:
      for message in self._call:
        action = message.action
        with self._lock:
          waiter = self._waiters.get(action.episode_id)
        if waiter is not None:
          waiter.put(action)
      error = SessionLost(grpc.StatusCode.CANCELLED, 'the session ended')
    except grpc.RpcError as e:
      kind = SessionLost if e.code() in _RETRYABLE else RemoteError
      error = kind(e.code(), e.details() or str(e))
    self.error = error
    with self._lock:
      waiters = list(self._waiters.values())
    for waiter in waiters:
      waiter.put(error)

  @property
  def alive(self) -> bool:
    return self.error is None

  def register(self, episode_id: int) -> 'queue.Queue[Any]':
    waiter: 'queue.Queue[Any]' = queue.Queue()
    with self._lock:
      self._waiters[episode_id] = waiter
    if self.error is not None:
      waiter.put(self.error)
    return waiter

  def unregister(self, episode_id: int) -> None:
    with self._lock:
      self._waiters.pop(episode_id, None)

  def send(self, step: pb.Step) -> None:
    self._requests.put(pb.ClientMessage(step=step).SerializeToString())

  def close(self) -> None:
    """Ends the stream; open episodes see `SessionLost`."""
    self._requests.put(None)
    self._reader.join(timeout=1.0)
    self._call.cancel()
    self._reader.join(timeout=1.0)


def _first(call, timeout_s: float) -> pb.ServerMessage:
  result: 'queue.Queue[Any]' = queue.Queue()

  def read():
    try:
      result.put(next(call))
    except grpc.RpcError as e:
      result.put(e)
    except StopIteration:
      result.put(RemoteError(None, 'the service closed the session'))
  threading.Thread(target=read, daemon=True).start()
  try:
    item = result.get(timeout=timeout_s)
  except queue.Empty:
    call.cancel()
    raise SessionLost(grpc.StatusCode.DEADLINE_EXCEEDED,
                      f'no Welcome within {timeout_s} s') from None
  if isinstance(item, grpc.RpcError):
    kind = SessionLost if item.code() in _RETRYABLE else RemoteError
    raise kind(item.code(), item.details() or str(item))
  if isinstance(item, Exception):
    raise item
  return item


class Episode:
  """One episode; call `step` once per timestep (see module doc)."""

  def __init__(self, client: 'Client', session: _Session, episode_id: int):
    self._client = client
    self._session = session
    self.episode_id = episode_id
    self._waiter = session.register(episode_id)
    self._started = False
    self.done = False
    self.policy_version = -1

  def step(self, observation: Any, reward: float = 0.0,
           terminal: bool = False, truncated: bool = False,
           legal_actions: Optional[Sequence[bool]] = None,
           logged_action: Optional[int] = None,
           logged_logits: Optional[Sequence[float]] = None,
           timeout_s: Optional[float] = None) -> Optional[int]:
    """Sends one timestep; returns the agent's action, or None for a step
    that ends the episode (`terminal`/`truncated`) or that carries the
    action the client took itself (`logged_action`, off-policy data).

    The first call starts the episode (its reward is ignored).
    """
    if self.done:
      raise RemoteError(None, f'episode {self.episode_id} has ended; call '
                        'Client.episode() for a new one.')
    specs = self._client.specs
    step = pb.Step(
        episode_id=self.episode_id,
        observation=specs_lib.tensor_to_proto(observation,
                                              specs.observation_dtype),
        reward=float(reward) if self._started else 0.0,
        terminal=bool(terminal), truncated=bool(truncated))
    if legal_actions is not None:
      step.legal_actions.extend(bool(x) for x in legal_actions)
    if logged_action is not None:
      step.logged.action = int(logged_action)
      if logged_logits is not None:
        step.logged.logits.extend(float(x) for x in logged_logits)
    self._started = True
    self._session.send(step)
    timeout = self._client.step_timeout_s if timeout_s is None else timeout_s
    try:
      answer = self._waiter.get(timeout=timeout)
    except queue.Empty:
      self._finish()
      raise SessionLost(grpc.StatusCode.DEADLINE_EXCEEDED,
                        f'no answer within {timeout} s') from None
    if isinstance(answer, RemoteError):
      self._finish()
      raise answer
    self.policy_version = int(answer.policy_version)
    if terminal or truncated:
      self._finish()
      return None
    return None if logged_action is not None else int(answer.action)

  def _finish(self) -> None:
    self.done = True
    self._session.unregister(self.episode_id)


class Client:
  """A connection to the remote environment service; see module doc."""

  def __init__(self, address: str, specs: Specs,
               token: Optional[str] = None,
               client_name: str = 'python',
               root_certificates: Optional[bytes] = None,
               connect_timeout_s: float = 60.0,
               step_timeout_s: float = 60.0):
    """Args:
      address: 'host:port' of the service.
      specs: this client's observation shape/dtype and number of actions;
        the service refuses specs other than the agent's.
      token: the shared token; default: $REPERTORY_REMOTE_TOKEN.
      client_name: shown in the service's logs.
      root_certificates: PEM root certificates to connect with TLS (None:
        plain TCP, for loopback).
      connect_timeout_s: how long `episode()` retries to (re)connect.
      step_timeout_s: how long a step waits for its action.
    """
    token = token if token is not None else os.environ.get(
        specs_lib.TOKEN_ENV_VAR, '')
    if not token:
      raise ValueError('Client needs a token (token=... or '
                       f'${specs_lib.TOKEN_ENV_VAR}).')
    self.address = address
    self.specs = specs
    self.connect_timeout_s = connect_timeout_s
    self.step_timeout_s = step_timeout_s
    self._metadata = ((specs_lib.METADATA_KEY, f'Bearer {token}'),)
    self._hello = pb.Hello(specs=specs.to_proto(), client_name=client_name)
    self._root_certificates = root_certificates
    self._channel: Optional[grpc.Channel] = None
    self._session: Optional[_Session] = None
    self._ids = itertools.count(1)
    self._lock = threading.Lock()
    self.num_connects = 0

  def _new_channel(self) -> grpc.Channel:
    if self._root_certificates is None:
      return grpc.insecure_channel(self.address)
    return grpc.secure_channel(
        self.address, grpc.ssl_channel_credentials(self._root_certificates))

  def _connect(self, deadline: float) -> _Session:
    delay = 0.05
    while True:
      if self._channel is None:
        self._channel = self._new_channel()
      try:
        session = _Session(self._channel, self._metadata, self._hello,
                           timeout_s=max(0.1, deadline - time.monotonic()))
        self.num_connects += 1
        return session
      except SessionLost:
        if time.monotonic() + delay > deadline:
          raise
        self._channel.close()
        self._channel = None
        time.sleep(delay)
        delay = min(delay * 2, 1.0)

  @property
  def server_id(self) -> str:
    """The id of the service instance of the current session."""
    return self._session.welcome.server_id if self._session else ''

  def agent_specs(self) -> Specs:
    """The agent's specs (GetSpecs)."""
    if self._channel is None:
      self._channel = self._new_channel()
    call = self._channel.unary_unary(
        _METHOD + 'GetSpecs', request_serializer=lambda b: b,
        response_deserializer=pb.Specs.FromString)
    try:
      return Specs.from_proto(call(b'', metadata=self._metadata,
                                   timeout=self.connect_timeout_s))
    except grpc.RpcError as e:
      raise RemoteError(e.code(), e.details() or str(e)) from None

  def episode(self, timeout_s: Optional[float] = None) -> Episode:
    """A new episode, on the current session or (if it was lost) a new one.

    Args:
      timeout_s: the longest this call waits for a session (default
        `connect_timeout_s`), including the time another thread spends
        connecting; then it raises `SessionLost`.
    """
    timeout = self.connect_timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + max(timeout, 0.0)
    if not self._lock.acquire(timeout=max(timeout, 0.0)):
      raise SessionLost(grpc.StatusCode.DEADLINE_EXCEEDED,
                        f'no session within {timeout} s (another thread is '
                        'still connecting)')
    try:
      if self._session is None or not self._session.alive:
        if self._session is not None:
          self._session.close()
          self._session = None
        self._session = self._connect(deadline)
      return Episode(self, self._session, next(self._ids))
    finally:
      self._lock.release()

  def close(self) -> None:
    with self._lock:
      if self._session is not None:
        self._session.close()
        self._session = None
      if self._channel is not None:
        self._channel.close()
        self._channel = None

  def __enter__(self) -> 'Client':
    return self

  def __exit__(self, *exc) -> None:
    self.close()
