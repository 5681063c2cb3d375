"""The remote environment node: the gRPC service remote clients connect to,
and the hub the agent's environments attach to, as one node of a program
graph.

```
 remote clients (any language) --gRPC--> EnvironmentService (this node)
      one service slot per open episode     | act(slot, timestep)
                                            v
                             SlotHub --loopback--> SlotEnvironment of the
                                 <---- action ----  agent's own actors
```

The node knows no agent: the agent's actors step `environment.SlotEnvironment`s
as they step any environment, and write their own trajectories.
"""

import os
from typing import Any

from absl import logging

from repertory import launch
from repertory.remote import hub as hub_lib
from repertory.remote import options as options_lib
from repertory.remote import service as service_lib
from repertory.remote import validation
from repertory_remote import wire as specs_lib


class RemoteEnvironmentNode:
  """Serves remote episodes to the agent's environments; see module doc.

  Both gRPC servers start in the constructor: the clients' service on
  `options.host:options.port` (its address written to
  `options.address_file` when set) and the slot server on loopback (its
  address written to `slot_address_file`, authenticated by `slot_token`).
  `run()` serves until the program stops.
  """

  def __init__(self, observation_spec: Any, action_spec: Any,
               options: options_lib.RemoteOptions, slot_address_file: str,
               slot_token: str, reward_spec: Any = None):
    self.specs = specs_lib.Specs.from_dm_env(observation_spec, action_spec)
    self._options = options
    self._closed = False
    self.hub = hub_lib.SlotHub(self.specs, slot_token)
    self._slot_server, self.slot_port = self.hub.serve(options_lib.LOOPBACK)
    self.service = service_lib.EnvironmentService(
        self.specs, self.hub.act, options.token(),
        max_episodes=options.max_episodes,
        unsupported=self.hub.unsupported,
        limits=validation.Limits.from_dm_env(
            observation_spec, reward_spec,
            max_abs_reward=options.max_abs_reward,
            max_abs_observation=options.max_abs_observation),
        hello_timeout_s=options.hello_timeout_s,
        max_sessions_per_peer=options.max_sessions_per_peer)
    self._grpc, self.port = service_lib.serve(
        self.service, options.host, options.port, tls=options.tls(),
        max_sessions=options.max_sessions)
    _write(slot_address_file, f'{options_lib.LOOPBACK}:{self.slot_port}')
    logging.info('remote: serving %s on %s (specs %s).',
                 service_lib.SERVICE, self.address(), self.specs)
    if options.address_file:
      _write(options.address_file, self.address())

  def address(self) -> str:
    """'host:port' the clients connect to."""
    return f'{self._options.host}:{self.port}'

  def stats(self) -> dict:
    """The hub's environments plus the service's sessions."""
    stats = self.hub.stats()
    stats.update(open_episodes=self.service.open_episodes(),
                 sessions=self.service.num_sessions,
                 truncated_by_disconnect=(
                     self.service.num_truncated_by_disconnect))
    return stats

  def run(self) -> None:
    """Serves until the program stops, then closes."""
    try:
      launch.stop_event().wait()
    finally:
      self.close()

  def close(self) -> None:
    """Stops serving (open sessions end; their episodes are truncated)."""
    if self._closed:
      return
    self._closed = True
    self._grpc.stop(grace=1.0).wait(5.0)
    self.service.close()
    self.hub.close()
    self._slot_server.stop(grace=1.0).wait(5.0)


def _write(path: str, text: str) -> None:
  """Writes `text` to `path` at once (readers never see half of it)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  temporary = path + '.tmp'
  with open(temporary, 'w') as f:
    f.write(text + '\n')
  os.replace(temporary, path)
