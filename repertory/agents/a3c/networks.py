"""A3C's networks: PPO's MLP policy-value network (one network, one place)
and the order in which gradients travel between actors and learner."""

from typing import List

import sonnet as snt
import tensorflow as tf

from repertory.agents.ppo.networks import environment_specs  # pylint: disable=unused-import
from repertory.agents.ppo.networks import export_snapshot  # pylint: disable=unused-import
from repertory.agents.ppo.networks import make_network  # pylint: disable=unused-import
from repertory.agents.ppo.networks import Policy  # pylint: disable=unused-import
from repertory.agents.ppo.networks import POLICY  # pylint: disable=unused-import
from repertory.components import networks


def variable_list(network: snt.Module) -> List[tf.Variable]:
  """The network's variables in the order gradients are sent in: sorted by
  their attribute-path names, identical in every process."""
  named = networks.named_variables(network)
  return [named[name] for name in sorted(named)]
