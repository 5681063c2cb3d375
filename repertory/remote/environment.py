"""Remote episodes as plain `dm_env` environments: `SlotEnvironment`.

The run layer (`program.make_program`) gives the agent a `SlotFactory` as its
environment. Every environment the agent's actors make from it attaches to
the service node's `hub.SlotHub` over loopback and plays the remote episodes
the hub hands it: `reset()` waits for a client's episode to start and
returns its first observation; `step(action)` sends the action to that
client and returns its next step. The agent's own acting, adders and
learner see an environment like any other.

If the service goes away mid-episode (it restarted), the episode ends here
with a truncation (LAST, discount 1, reward 0, its last observation) and the
next `reset()` attaches again.
"""

import os
import queue
import threading
import time
from typing import Any, Optional

from absl import logging
import dm_env
import grpc
import numpy as np

from repertory import launch
from repertory.remote import hub as hub_lib
from repertory_remote import environment_pb2 as pb
from repertory_remote import wire


class SlotFactory:
  """A picklable environment factory: `factory(seed=...)` makes one
  `SlotEnvironment`; `evaluation_env` is the local spec evaluation plays.

  Args:
    spec: the local environment spec of the same specs (e.g. 'catch').
    specs: `(observation, action, reward, discount)` specs of `spec`.
    address_file: where the service node writes its slot address.
    token: the secret the node's slot server expects.
  """

  def __init__(self, spec: str, specs: tuple, address_file: str,
               token: str):
    self.evaluation_env = spec
    self.specs = specs
    self.address_file = address_file
    self._token = token

  def __call__(self, seed: Optional[int] = None) -> 'SlotEnvironment':
    del seed  # The remote game draws its own episodes.
    return SlotEnvironment(self.address_file, self._token, *self.specs)

  def __repr__(self) -> str:
    return f'remote:{self.evaluation_env}'


class SlotEnvironment(dm_env.Environment):
  """One slot: the remote episodes the hub hands it, one after another."""

  def __init__(self, address_file: str, token: str, observation_spec: Any,
               action_spec: Any, reward_spec: Any, discount_spec: Any):
    self._address_file = address_file
    self._token = token
    self._specs = (observation_spec, action_spec, reward_spec, discount_spec)
    self._wire = wire.Specs.from_dm_env(observation_spec, action_spec)
    self._channel = None
    self._outgoing: Optional['queue.Queue[Optional[bytes]]'] = None
    self._incoming: 'queue.Queue[Any]' = queue.Queue()
    self._episode: Optional[int] = None
    self._observation = None

  # --- dm_env --------------------------------------------------------------

  def reset(self) -> dm_env.TimeStep:
    """Waits for a remote episode to start on this slot."""
    if self._episode is not None:  # A remote game cannot be reset: leave it.
      self._detach()
    while True:
      if self._channel is None:
        self._attach()
      message = self._next('a remote episode')
      if message is None:  # The service went away: attach again.
        self._detach()
        self._check_stop()
        time.sleep(hub_lib.WAIT_SLICE_S)
        continue
      self._episode = int(message.episode_id)
      self._observation = self._decode(message)
      return dm_env.restart(self._observation)

  def step(self, action: Any) -> dm_env.TimeStep:
    if self._episode is None:
      return self.reset()
    self._outgoing.put(pb.Action(action=int(np.asarray(action))
                                 ).SerializeToString())
    message = self._next('the next step of a remote episode')
    if message is None or int(message.episode_id) != self._episode:
      self._episode = None
      self._detach()
      return dm_env.truncation(self._reward(0.0), self._observation)
    self._observation = self._decode(message)
    reward = self._reward(message.reward)
    if message.terminal or message.truncated:
      self._episode = None
      if message.terminal:
        return dm_env.termination(reward, self._observation)
      return dm_env.truncation(reward, self._observation)
    return dm_env.transition(reward, self._observation)

  def observation_spec(self) -> Any:
    return self._specs[0]

  def action_spec(self) -> Any:
    return self._specs[1]

  def reward_spec(self) -> Any:
    return self._specs[2]

  def discount_spec(self) -> Any:
    return self._specs[3]

  def close(self) -> None:
    self._detach()

  # --- the link to the hub -------------------------------------------------

  def _attach(self) -> None:
    address = self._read_address()
    self._channel = grpc.insecure_channel(address)
    outgoing: 'queue.Queue[Optional[bytes]]' = queue.Queue()
    incoming: 'queue.Queue[Any]' = queue.Queue()
    call = self._channel.stream_stream(
        hub_lib.ATTACH, request_serializer=lambda b: b,
        response_deserializer=pb.Step.FromString)
    responses = call(iter(outgoing.get, None), metadata=(
        (wire.METADATA_KEY, f'Bearer {self._token}'),))

    def read():
      try:
        for message in responses:
          incoming.put(message)
      except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNAUTHENTICATED:
          logging.error('remote: the slot server refused this slot: %s',
                        e.details())
      finally:
        incoming.put(None)
    threading.Thread(target=read, daemon=True, name='remote-slot').start()
    self._outgoing, self._incoming = outgoing, incoming

  def _detach(self) -> None:
    if self._outgoing is not None:
      self._outgoing.put(None)
    if self._channel is not None:
      self._channel.close()
    self._channel, self._outgoing = None, None
    self._episode = None

  def _read_address(self) -> str:
    logged = time.monotonic()
    while True:
      try:
        with open(self._address_file) as f:
          address = f.read().strip()
        if address:
          return address
      except FileNotFoundError:
        pass
      self._check_stop()
      time.sleep(0.1)
      if time.monotonic() - logged > hub_lib.LOG_EVERY_S:
        logged = time.monotonic()
        logging.info('remote: waiting for the service node to write %s.',
                     self._address_file)

  def _next(self, what: str) -> Optional[pb.Step]:
    """The hub's next step (None when the link is lost)."""
    waited = 0.0
    while True:
      try:
        return self._incoming.get(timeout=hub_lib.WAIT_SLICE_S)
      except queue.Empty:
        self._check_stop()
        waited += hub_lib.WAIT_SLICE_S
        if waited % hub_lib.LOG_EVERY_S < hub_lib.WAIT_SLICE_S:
          logging.info(
              'remote: this environment waited %.0f s for %s (an actor acts '
              'once each of its --envs_per_actor environments has a step: '
              'clients should keep at least --num_actors x --envs_per_actor '
              'episodes open).', waited, what)

  def _check_stop(self) -> None:
    if launch.stopping():
      self._detach()
      raise hub_lib.SlotClosedError('the program is stopping.')

  def _decode(self, message: pb.Step) -> np.ndarray:
    return wire.tensor_from_proto(message.observation, self._wire,
                                  'step.observation')

  def _reward(self, value: float) -> Any:
    return np.asarray(value, self._specs[2].dtype)


def slot_address_file(address_file: str) -> str:
  """Where the node writes its slot address: beside the clients' one."""
  return os.path.join(os.path.dirname(os.path.abspath(address_file)),
                      'slots')
