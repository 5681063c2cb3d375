"""The self-play network: an MLP policy-value network over one player's
observation, its logits masked to the legal actions."""

from typing import Any, Sequence

import tensorflow as tf

from repertory.components import networks


def make_network(spec: Any, hidden_sizes: Sequence[int]
                 ) -> networks.PolicyValueNetwork:
  """`PolicyValueNetwork(MLPTorso)` over `spec.observations['observation']`
  (variables built); `components.league.MLPPolicy` plays its weights."""
  shape = tuple(spec.observations['observation'].shape)
  network = networks.PolicyValueNetwork(
      networks.MLPTorso(tuple(hidden_sizes), max(len(shape), 1)),
      num_actions=int(spec.actions.num_values))
  network(tf.zeros((1,) + shape))
  return network


def masked_outputs(network, observation: Any):
  """(logits with illegal actions at -1e9, values) for `[..., obs]`."""
  out = network(observation['observation'])
  logits = tf.where(observation['legal_actions'] > 0, out.logits,
                    tf.fill(tf.shape(out.logits), -1e9))
  return logits, out.value
