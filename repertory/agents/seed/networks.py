"""SEED's networks: the actor-critic's policy-value network, run by the
inference server (`make_policy`) and trained by the V-trace learner."""

from typing import Any

from repertory.components.actor_critic import config as config_lib
from repertory.components.actor_critic import networks as networks_lib


def make_policy(config: config_lib.ActorCriticConfig, spec: Any,
                seed: int = 0) -> networks_lib.Policy:
  """The inference server's batched, sampling policy.

  It leaves TensorFlow's thread pools alone (no `limit_tf_threads()`, unlike
  actors): the server shares the learner's process by default, and the
  limit is process-wide, so whichever node first started TensorFlow decided
  whether the learner trained on one thread. The policy's session runs its
  ops on the calling thread anyway (`GraphFunction`)."""
  return networks_lib.Policy(config, spec.observations, spec.actions,
                             seed=seed)
