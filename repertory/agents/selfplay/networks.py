"""The self-play network: an MLP torso with a policy head (logits) and an
action-value head (Q, one per action), over one player's observation; the
logits are masked to the legal actions."""

from typing import Any, NamedTuple, Sequence

import sonnet as snt
import tensorflow as tf

from repertory.components import networks
from repertory.components.networks import batching


class PolicyQOutput(NamedTuple):
  logits: tf.Tensor  # [..., A] unmasked.
  q: tf.Tensor       # [..., A] action values.


class PolicyQNetwork(snt.Module):
  """torso -> (policy logits, Q values); names its variables 'torso/...',
  'head/policy/...', 'head/q/...' (`components.league.MLPPolicy` plays them)."""

  def __init__(self, torso: snt.Module, num_actions: int,
               name: str = 'policy_q'):
    super().__init__(name=name)
    self._torso = torso
    self._head = _Head(num_actions)

  def __call__(self, observation: tf.Tensor) -> PolicyQOutput:
    return self._head(self._torso(observation))


class _Head(snt.Module):

  def __init__(self, num_actions: int):
    super().__init__(name='head')
    self._policy = snt.Linear(num_actions, name='policy')
    self._q = snt.Linear(num_actions, name='q')

  def __call__(self, embedding: tf.Tensor) -> PolicyQOutput:
    return PolicyQOutput(
        batching.apply_over_leading_dims(self._policy, embedding, 1),
        batching.apply_over_leading_dims(self._q, embedding, 1))


def make_network(spec: Any, hidden_sizes: Sequence[int]) -> PolicyQNetwork:
  """The network over `spec.observations['observation']`, variables built."""
  shape = tuple(spec.observations['observation'].shape)
  network = PolicyQNetwork(
      networks.MLPTorso(tuple(hidden_sizes), max(len(shape), 1)),
      num_actions=int(spec.actions.num_values))
  network(tf.zeros((1,) + shape))
  return network


def masked_logits(logits: tf.Tensor, legal: tf.Tensor) -> tf.Tensor:
  """Illegal actions (legal == 0) at -1e9."""
  return tf.where(legal > 0, logits, tf.fill(tf.shape(logits), -1e9))
