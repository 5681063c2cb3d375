"""The order in which A3C's gradients travel between actors and learner
(the network is `agents.actor_critic.mlp_policy`'s, as PPO's)."""

from typing import List

import sonnet as snt
import tensorflow as tf

from repertory.components import networks


def variable_list(network: snt.Module) -> List[tf.Variable]:
  """The network's variables in the order gradients are sent in: sorted by
  their attribute-path names, identical in every process."""
  named = networks.named_variables(network)
  return [named[name] for name in sorted(named)]
