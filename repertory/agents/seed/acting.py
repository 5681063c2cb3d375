"""SEED's actor: steps environments only; the inference server acts.

A `BatchedActor` whose policy is an `inference.ServerPolicy`: one server call
per batched step, over a direct TCP channel (default) or through the
server's handle. This module must not import TensorFlow (tested): an actor
process of SEED holds environments and a client of the server, nothing else.
"""

from typing import Any

from repertory.components.actor_critic import config as config_lib
from repertory.components.actors.batched import BatchedActor
from repertory.components.evaluation import episodes
from repertory.components.inference.client import ServerPolicy


class SeedActor(BatchedActor):
  """Steps `num_envs` environments; one server call per batched step."""

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
               transport: str = 'tcp'):
    """Builds the environments and the server's client.

    Args:
      actor_id: this actor's id (unique among the server's actors).
      env_spec: an environment spec for `repertory.environments`.
      num_envs: environments stepped together (one server call per step).
      seed: environment i gets seed + i.
      server: the inference server's client (a dereferenced handle).
      batched_env_kind: see `ActorCriticConfig.batched_env_kind`.
      report_every: send steps and finished episodes every this many steps.
      counter: optional counter client (actor_steps).
      monitor: optional run monitor client (finished episodes).
      transport: 'tcp' or 'handle' (see `ServerPolicy`).
    """
    policy = ServerPolicy(actor_id, server, transport)
    from repertory import environments  # pylint: disable=g-import-not-at-top
    environment = environments.make_batched(
        env_spec, num_envs, seed=seed,
        kind=config_lib.batched_env_kind(batched_env_kind, env_spec))
    super().__init__(environment, policy, None, counter, monitor,
                     report_every=report_every,
                     min_report_interval_s=episodes.REPORT_INTERVAL_S)
