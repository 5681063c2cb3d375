"""SEED's actor: steps environments only; the inference server acts.

An `inference.ServerActor`: its environments in `env_groups` groups, each
group's batched step one server call, over a direct TCP channel (default)
or through the server's handle. This module must not import TensorFlow
(tested): an actor process of SEED holds environments and a client of the
server, nothing else.
"""

from typing import Any

from repertory.agents.actor_critic import config as config_lib
from repertory.components.evaluation import episodes
from repertory.components.inference.actor import ServerActor


class SeedActor(ServerActor):
  """Steps `num_envs` environments in `env_groups` groups; one server call
  per group and batched step."""

  def __init__(self,
               actor_id: int,
               env_spec: str,
               num_envs: int,
               seed: int,
               server: Any,
               batched_env_kind: str = 'auto',
               report_every: int = 20,
               counter: Any = None,
               monitor: Any = None,
               transport: str = 'tcp',
               env_groups: int = 1):
    """Builds the environments and the server's clients.

    Args:
      actor_id: this actor's id (unique among the server's actors).
      env_spec: an environment spec for `repertory.environments`.
      num_envs: the actor's environments; environment i gets seed + i.
      seed: see `num_envs`.
      server: the inference server's client (a dereferenced handle).
      batched_env_kind: see `ActorCriticConfig.batched_env_kind`.
      report_every: send steps and finished episodes every this many steps.
      counter: optional counter client (actor_steps).
      monitor: optional run monitor client (finished episodes).
      transport: 'tcp' or 'handle' (see `inference.ServerPolicy`).
      env_groups: groups of `num_envs / env_groups` environments, each its
        own call (see `inference.ServerActor`).
    """
    if env_groups < 1 or num_envs % env_groups:
      raise ValueError(f'SeedActor: env_groups={env_groups!r} must be >= 1 '
                       f'and divide num_envs={num_envs}.')
    from repertory import environments  # pylint: disable=g-import-not-at-top
    kind = config_lib.batched_env_kind(batched_env_kind, env_spec)
    size = num_envs // env_groups
    super().__init__(
        [environments.make_batched(env_spec, size, seed=seed + g * size,
                                   kind=kind) for g in range(env_groups)],
        actor_id, server, transport, counter, monitor,
        report_every=report_every,
        min_report_interval_s=episodes.REPORT_INTERVAL_S)
