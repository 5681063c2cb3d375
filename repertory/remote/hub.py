"""The service's side of the environment slots: remote episodes handed to the
agent's own actors.

```
 EnvironmentService --act(slot, timestep)--> SlotHub --Step--> SlotEnvironment
   (remote clients)  <--------- action ------        <--Action-- (an actor's
                                                                 environment)
```

Each `environment.SlotEnvironment` of the agent's actors attaches to the hub
over loopback (the `Slots/Attach` stream, token-authenticated) and waits for
an episode. When a remote episode starts, the hub binds it to an idle
attached environment (the episode waits until one is idle) and forwards
each of its steps as a `pb.Step`; the environment returns it to its actor as
a `dm_env.TimeStep` and sends back the action the actor chose, which the hub
answers the client with. A step that ends the episode is forwarded and
acknowledged at once; the environment is then idle again.

The hub knows nothing of the agent: whatever acts on the environments
(a feed-forward actor, SEED's inference server, a recurrent Q-network)
writes its own trajectories.
"""

import collections
import concurrent.futures
import hmac
import itertools
import queue
import threading
from typing import Any, Deque, Dict, Optional, Tuple

from absl import logging
import grpc
import numpy as np

from repertory_remote import environment_pb2 as pb
from repertory_remote import wire

FIRST, MID, LAST = 0, 1, 2  # dm_env.StepType values
SLOTS_SERVICE = 'repertory.remote.v1.Slots'
ATTACH = f'/{SLOTS_SERVICE}/Attach'
WAIT_SLICE_S = 1.0  # one wait between checks that the hub still serves
LOG_EVERY_S = 30.0  # how often a long wait says what it waits for
MAX_SLOTS = 1024  # the most environments that may attach at once

UNSUPPORTED = {
    'step.legal_actions': 'legal-action masks are not supported: the '
                          "agent's actors step remote episodes as plain "
                          'environments',
    'step.logged': 'logged actions are not supported: the agent\'s actors '
                   'choose every action of a remote episode',
}


class SlotClosedError(RuntimeError):
  """The environment that played an episode went away."""


class _Link:
  """One attached environment."""

  def __init__(self, number: int):
    self.number = number
    self.outgoing: 'queue.Queue[Optional[bytes]]' = queue.Queue()
    self.actions: 'queue.Queue[Optional[int]]' = queue.Queue()
    self.alive = True
    self.episode_id = 0

  def detach(self) -> None:
    self.alive = False
    self.actions.put(None)
    self.outgoing.put(None)


class SlotHub:
  """The `act` of `service.EnvironmentService` over attached environments.

  Args:
    specs: the agent's wire specs (the observation dtype of forwarded steps).
    token: the secret attaching environments must send.
  """

  unsupported = UNSUPPORTED

  def __init__(self, specs: wire.Specs, token: str):
    if not token:
      raise ValueError('SlotHub needs a non-empty token.')
    self._specs = specs
    self._token = token.encode()
    self._lock = threading.Condition()
    self._idle: Deque[_Link] = collections.deque()
    self._links: Dict[int, _Link] = {}
    self._bound: Dict[int, _Link] = {}
    self._numbers = itertools.count()
    self._episodes = itertools.count(1)
    self._closed = False
    self.num_steps = 0

  # --- the environments' side ----------------------------------------------

  def serve(self, host: str = '127.0.0.1', port: int = 0
            ) -> Tuple[grpc.Server, int]:
    """Starts the loopback server environments attach to; (server, port)."""
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(
            MAX_SLOTS + 4, thread_name_prefix='remote-slots'),
        handlers=[grpc.method_handlers_generic_handler(SLOTS_SERVICE, {
            'Attach': grpc.stream_stream_rpc_method_handler(self._attach)})],
        maximum_concurrent_rpcs=MAX_SLOTS,
        options=[('grpc.so_reuseport', 0)])
    bound = server.add_insecure_port(f'{host}:{port}')
    if not bound:
      raise OSError(f'remote: cannot listen on {host}:{port} for slots.')
    server.start()
    return server, bound

  def _attach(self, requests, context):
    sent = dict(context.invocation_metadata()).get(wire.METADATA_KEY, '')
    if not hmac.compare_digest(str(sent).encode(), b'Bearer ' + self._token):
      context.abort(grpc.StatusCode.UNAUTHENTICATED, 'wrong slot token')
    with self._lock:
      if self._closed:
        context.abort(grpc.StatusCode.UNAVAILABLE, 'the service is closed')
      link = _Link(next(self._numbers))
      self._links[link.number] = link
      self._idle.append(link)
      self._lock.notify_all()
    threading.Thread(target=self._read_actions, args=(requests, link),
                     daemon=True, name=f'remote-slot-{link.number}').start()
    while True:
      item = link.outgoing.get()
      if item is None:
        return
      yield item

  def _read_actions(self, requests, link: _Link) -> None:
    try:
      for raw in requests:
        link.actions.put(int(pb.Action.FromString(raw).action))
    except Exception:  # pylint: disable=broad-except  # RpcError: it left.
      pass
    finally:
      with self._lock:
        self._links.pop(link.number, None)
        link.detach()
        self._lock.notify_all()

  # --- the service's side --------------------------------------------------

  def act(self, slot: int, step_type: int, reward: float, discount: float,
          observation: np.ndarray, mask: Any = None, logged_action: Any = None,
          logged_logits: Any = None) -> Tuple[int, int]:
    """Forwards one step of the episode on service slot `slot`; returns
    (the action, 0), or (-1, 0) for a step that ends the episode. Blocks
    until an environment is idle (a first step) or has acted."""
    del mask, logged_action, logged_logits  # Refused by `unsupported`.
    if step_type == FIRST:
      link = self._take_idle(slot)
    else:
      with self._lock:
        link = self._bound.get(slot)
      if link is None:
        raise SlotClosedError(f'no episode is open on slot {slot}.')
    ends = step_type == LAST
    link.outgoing.put(pb.Step(
        episode_id=link.episode_id,
        observation=wire.tensor_to_proto(observation,
                                         self._specs.observation_dtype),
        reward=float(reward), terminal=ends and discount == 0.0,
        truncated=ends and discount != 0.0).SerializeToString())
    with self._lock:
      self.num_steps += 1
    if ends:
      self._release(slot, link)
      return -1, 0
    action = self._wait(link.actions, f'the action of slot {link.number}',
                        link)
    if action is None:
      with self._lock:
        self._bound.pop(slot, None)
      raise SlotClosedError(
          f'the environment of slot {link.number} went away mid-episode '
          '(its actor stopped or restarted)')
    return action, 0

  def _take_idle(self, slot: int) -> _Link:
    waited = 0.0
    with self._lock:
      while True:
        if self._closed:
          raise SlotClosedError('the service is closed.')
        while self._idle and not self._idle[0].alive:
          self._idle.popleft()
        if self._idle:
          link = self._idle.popleft()
          link.episode_id = next(self._episodes)
          self._bound[slot] = link
          return link
        self._lock.wait(WAIT_SLICE_S)
        waited += WAIT_SLICE_S
        if waited % LOG_EVERY_S < WAIT_SLICE_S:
          logging.info('remote: an episode waits for an idle environment '
                       '(%d attached, all playing).', len(self._links))

  def _release(self, slot: int, link: _Link) -> None:
    with self._lock:
      self._bound.pop(slot, None)
      if link.alive:
        self._idle.append(link)
        self._lock.notify_all()

  def _wait(self, source: 'queue.Queue[Any]', what: str, link: _Link) -> Any:
    waited = 0.0
    while True:
      try:
        return source.get(timeout=WAIT_SLICE_S)
      except queue.Empty:
        if self._closed or not link.alive:
          return None
        waited += WAIT_SLICE_S
        if waited % LOG_EVERY_S < WAIT_SLICE_S:
          logging.info('remote: waiting %.0f s for %s.', waited, what)

  def stats(self) -> dict:
    with self._lock:
      return {'attached': len(self._links), 'idle': sum(
          link.alive for link in self._idle), 'playing': len(self._bound),
              'steps': self.num_steps}

  def close(self) -> None:
    with self._lock:
      self._closed = True
      links = list(self._links.values())
      self._lock.notify_all()
    for link in links:
      link.detach()
