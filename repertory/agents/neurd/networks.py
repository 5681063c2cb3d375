"""NeuRD's network: an MLP torso with a policy head (logits) and an
action-value head (Q, one value per action), over the seat's flat view.

Its weights are named as the actor-critic's feedforward network's
(`torso/mlp/layers/<i>/{w,b}`, `head/policy/{w,b}`, `head/value/{w,b}`),
so the actor-critic family's numpy acting step evaluates them; the value
head just has one output per action.
"""

from typing import Any, NamedTuple

import sonnet as snt
import tensorflow as tf

from repertory.agents.actor_critic import numpy_policy
from repertory.components import networks
from repertory.components.networks import batching

POLICY = numpy_policy.POLICY  # The variable group actors read.


class PolicyQOutput(NamedTuple):
  logits: tf.Tensor  # [..., A] unmasked.
  q: tf.Tensor       # [..., A] action values.


class _Head(snt.Module):

  def __init__(self, num_actions: int):
    super().__init__(name='head')
    self._policy = snt.Linear(num_actions, name='policy')
    self._value = snt.Linear(num_actions, name='value')

  def __call__(self, embedding: tf.Tensor) -> PolicyQOutput:
    return PolicyQOutput(
        batching.apply_over_leading_dims(self._policy, embedding, 1),
        batching.apply_over_leading_dims(self._value, embedding, 1))


class PolicyQNetwork(snt.Module):
  """torso -> (policy logits, Q values) on `[..., D]` observations."""

  def __init__(self, torso: snt.Module, num_actions: int):
    super().__init__(name='policy_q')
    self._torso = torso
    self._head = _Head(num_actions)

  def __call__(self, observation: tf.Tensor) -> PolicyQOutput:
    return self._head(self._torso(observation))


def make_network(config: Any, spec: Any) -> PolicyQNetwork:
  """The network over `spec.observations` (a flat seat view), variables
  built."""
  shape = tuple(spec.observations.shape)
  torso = networks.MLPTorso(config.hidden_sizes, obs_rank=max(len(shape), 1),
                            activation=getattr(tf.nn, config.activation))
  network = PolicyQNetwork(torso, int(spec.actions.num_values))
  network(tf.zeros((1,) + shape, tf.float32))
  return network


def legal_actions(observation: tf.Tensor, num_actions: int) -> tf.Tensor:
  """The legal-action mask `[..., A]` that ends a seat's flat view
  (`environments.multiagent.seat.flat_view`)."""
  return observation[..., -num_actions:]


def export_snapshot(network: PolicyQNetwork, spec: Any, path: str) -> str:
  """Exports the most likely legal action as a SavedModel; its path."""
  from repertory.components import model_store  # pylint: disable=g-import-not-at-top
  from repertory.agents.neurd import loss  # pylint: disable=g-import-not-at-top
  num_actions = int(spec.actions.num_values)

  def policy(observation):
    logits = loss.masked_logits(network(observation).logits,
                                legal_actions(observation, num_actions))
    return tf.argmax(logits, axis=-1, output_type=tf.int32)
  return model_store.export_policy(path, policy, spec.observations,
                                   owner=network)
