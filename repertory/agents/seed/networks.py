"""SEED's networks: the actor-critic's policy-value network, run by the
inference server (`make_policy`) and trained by the V-trace learner."""

from typing import Any

from repertory.components.actor_critic import config as config_lib
from repertory.components.actor_critic import networks as networks_lib


def make_policy(config: config_lib.ActorCriticConfig, spec: Any,
                seed: int = 0) -> networks_lib.Policy:
  """The inference server's batched, sampling policy."""
  from repertory.components.actors import limit_tf_threads  # pylint: disable=g-import-not-at-top
  limit_tf_threads()
  return networks_lib.Policy(config, spec.observations, spec.actions,
                             seed=seed)
