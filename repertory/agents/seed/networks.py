"""SEED's networks: IMPALA's policy-value network, run by the inference
server (`make_policy`) and trained by the V-trace learner."""

from typing import Any

from repertory.agents.impala import config as config_lib
from repertory.agents.impala import networks as impala_networks

POLICY = impala_networks.POLICY
make_network = impala_networks.make_network
num_actions = impala_networks.num_actions
state_spec = impala_networks.state_spec
environment_specs = impala_networks.environment_specs


def make_policy(config: config_lib.Config, observation_spec: Any,
                action_spec: Any, seed: int = 0) -> impala_networks.Policy:
  """The inference server's batched, sampling policy."""
  from repertory.components.actors import limit_tf_threads  # pylint: disable=g-import-not-at-top
  limit_tf_threads()
  return impala_networks.Policy(config, observation_spec, action_spec,
                                seed=seed)
