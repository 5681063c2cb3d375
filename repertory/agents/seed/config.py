"""SEED RL's hyperparameters: IMPALA's plus the inference server's.

Like IMPALA's config module, this imports no TensorFlow.
"""

import dataclasses

from repertory import launch
from repertory.agents.actor_critic import config as actor_critic_config

PLACEMENTS = ('learner', 'separate')


@dataclasses.dataclass
class Config(actor_critic_config.ActorCriticConfig):
  """SEED's settings: every `ActorCriticConfig` field (IMPALA's: same
  learner, same meaning) plus those of the central inference server.

  `variable_update_period` counts inference batches here: each inference
  server pulls new weights from the learner every this many batches.

  Attributes (besides IMPALA's):
    max_batch_size: the most actor calls (each carrying an actor's
      `envs_per_actor` timesteps) one forward pass serves; 0 means all the
      actors a server serves.
    batch_timeout_ms: how long a partial batch waits for more calls after
      its first arrived; 0 serves the calls that are ready at once (calls
      that arrive while a batch is served make the next one, so batches
      grow with the load) and keeps an actor from waiting on the others,
      e.g. on the last one still stepping at the end of a run.
    inference_placement: 'learner' runs the inference servers in the
      learner's process (SEED's design: inference on the learner's
      accelerator); 'separate' gives them processes of their own (group
      'inference').
    num_inference_servers: how many servers; actor i talks to server
      i % num_inference_servers.
    inference_transport: how an actor's steps reach its server: 'tcp', a
      direct TCP connection (`launch.ChannelClient`), or 'handle', a call
      through the server's node handle (a Ray actor call in local_mp and
      ray, slower: see BENCHMARKS.md).
    env_groups: an actor's `envs_per_actor` environments in this many
      groups, each group's step its own call to the server, sent as soon as
      the group has stepped: the actor steps one group while the server
      acts for another (`inference.ServerActor`; 2 is Sample Factory's
      double buffering). The server then serves `env_groups` calls of
      `envs_per_actor / env_groups` environments per actor (and with
      `batched_items` writes items of that many). Needs
      `inference_transport='tcp'`.
  """
  variable_update_period: int = 1
  max_batch_size: int = 0
  batch_timeout_ms: float = 0.0
  inference_placement: str = 'learner'
  num_inference_servers: int = 1
  inference_transport: str = 'tcp'
  env_groups: int = 1

  def __post_init__(self):
    super().__post_init__()
    if self.max_batch_size < 0:
      raise ValueError('Config.max_batch_size must be >= 0 (0: all actors of '
                       f'a server), got {self.max_batch_size!r}.')
    if self.batch_timeout_ms < 0:
      raise ValueError('Config.batch_timeout_ms must be >= 0, got '
                       f'{self.batch_timeout_ms!r}.')
    if self.inference_placement not in PLACEMENTS:
      raise ValueError(
          f'Config.inference_placement={self.inference_placement!r}; choose '
          f'one of {PLACEMENTS}.')
    if self.inference_transport not in launch.TRANSPORTS:
      raise ValueError(
          f'Config.inference_transport={self.inference_transport!r}; choose '
          f'one of {launch.TRANSPORTS}.')
    if self.num_inference_servers < 1:
      raise ValueError('Config.num_inference_servers must be >= 1, got '
                       f'{self.num_inference_servers!r}.')
    if self.env_groups < 1:
      raise ValueError(
          f'Config.env_groups must be >= 1, got {self.env_groups!r}.')
    if self.env_groups > 1 and self.inference_transport != 'tcp':
      raise ValueError(
          f'Config.env_groups={self.env_groups} needs '
          f"inference_transport='tcp' (a call through the handle waits for "
          f'its actions), got {self.inference_transport!r}.')

  def envs_per_call(self, envs_per_actor: int) -> int:
    """The environments of one server call (one group of an actor)."""
    if envs_per_actor % self.env_groups:
      raise ValueError(
          f'Config.env_groups={self.env_groups} must divide '
          f'envs_per_actor={envs_per_actor}.')
    return envs_per_actor // self.env_groups

  def batch_size_for(self, num_actors: int, server: int = 0) -> int:
    """The max batch size of server `server` when `num_actors` actors share
    the `num_inference_servers` servers (actor i talks to server
    i % num_inference_servers): `max_batch_size`, or else the calls of all
    of that server's actors (`env_groups` each)."""
    if not 0 <= server < self.num_inference_servers:
      raise ValueError(
          f'batch_size_for: server={server!r}; the servers are 0 to '
          f'{self.num_inference_servers - 1} (num_inference_servers='
          f'{self.num_inference_servers}).')
    if self.max_batch_size:
      return self.max_batch_size
    return max(1, self.env_groups * len(
        range(server, num_actors, self.num_inference_servers)))
