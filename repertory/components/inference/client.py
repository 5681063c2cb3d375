"""The actor's side of central inference: `ServerPolicy`, one connection's
calls to an `InferenceServer` (`send` a batched timestep, `receive` its
actions; `inference.ServerActor` overlaps several), and a `core.Policy`
whose step makes one such call, for a plain `BatchedActor`.

Imports neither TensorFlow nor Reverb.
"""

import os
from typing import Any, Dict, Tuple

import numpy as np

from repertory import launch


class ServerPolicy:
  """Acts by calling `InferenceServer.inference` with the batched timestep.

  The server keeps the recurrent state, the weights and the trajectories, so
  `initial_state` is `()`, `set_weights` is never needed and the extras are
  `{}`. `BatchedActor` calls `observe_timestep(timestep)` before each
  `step`: the server needs the step type, reward and discount with the
  observation.

  Args:
    actor_id: this actor's id (unique among the server's actors).
    server: the inference server's client (a dereferenced handle).
    transport: 'tcp' (a `launch.ChannelClient` to the server's
      `channel_address()`, made at the first step) or 'handle'
      (`server.inference` itself).
  """

  def __init__(self, actor_id: int, server: Any, transport: str = 'tcp'):
    if transport not in launch.TRANSPORTS:
      raise ValueError(f'ServerPolicy transport={transport!r}; choose one of '
                       f'{launch.TRANSPORTS}.')
    self._actor_id = np.int64(actor_id)
    # A new id per actor process: the server resets this actor's states when
    # it sees a new one (a restarted actor).
    self._run_id = np.int64(int.from_bytes(os.urandom(7), 'little'))
    self._server = server
    self._transport = transport
    self._channel = None
    self._timestep = None  # Observed, for `step`.
    self._sent = None  # Sent through the handle, for `receive`.

  def initial_state(self, batch_size: int) -> Tuple[()]:
    del batch_size
    return ()

  def observe_timestep(self, timestep: Any) -> None:
    """The batched timestep whose observation the next `step` acts on."""
    self._timestep = timestep

  def step(self, observation: Any, state: Any, first: Any
           ) -> Tuple[Any, Dict[str, Any], Any]:
    del observation, first  # The observed timestep carries them.
    self.send(self._timestep)
    return self.receive(), {}, state

  def send(self, timestep: Any) -> None:
    """Asks for the actions of the batched `timestep` without waiting for
    them; `receive()` returns them. One request at a time. Over 'tcp' the
    request leaves now, so the caller can work while the server acts;
    through the handle the call is made by `receive`."""
    if self._transport == 'handle':
      self._sent = timestep
      return
    if self._channel is None:
      self._channel = launch.ChannelClient(self._server.channel_address())
    self._channel.send(*self._request(timestep))

  def receive(self) -> Any:
    """The actions of the timestep last sent (waiting for them)."""
    if self._transport == 'handle':
      timestep, self._sent = self._sent, None
      return self._server.inference(*self._request(timestep))
    return self._channel.receive()

  def _request(self, timestep: Any) -> Tuple[Any, ...]:
    return (self._actor_id, self._run_id, timestep.step_type,
            timestep.reward, timestep.discount, timestep.observation)

  def set_weights(self, weights: Any) -> None:
    del weights  # The server holds them.

  def close(self) -> None:
    if self._channel is not None:
      self._channel.close()
