"""The self-play network: an MLP torso (or with `conv_channels` a
`BoardTorso`: 3x3 convolutions, then the MLP) with a policy head (logits)
and an action-value head (Q, one per action), over one player's
observation; the logits are masked to the legal actions. With `use_lstm`
it is IMPALA's recurrent network instead
(`actor_critic.lstm_policy.make_network`: MLP torso, LSTM core, policy and
state-value heads)."""

from typing import Any, NamedTuple, Optional, Sequence

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


def make_network(spec: Any, hidden_sizes: Sequence[int],
                 lstm_size: Optional[int] = None,
                 conv_channels: Sequence[int] = ()) -> snt.Module:
  """The network over `spec.observations['observation']`, variables built:
  a `PolicyQNetwork` (MLP torso, or `BoardTorso` with `conv_channels`), or
  with `lstm_size` IMPALA's LSTM network."""
  shape = tuple(spec.observations['observation'].shape)
  if lstm_size is not None:
    from repertory.agents.actor_critic import lstm_policy  # pylint: disable=g-import-not-at-top
    return lstm_policy.make_network(shape, int(spec.actions.num_values),
                                    hidden_sizes, lstm_size)
  if conv_channels:
    networks.check_board_planes(conv_channels, shape)
    torso = networks.BoardTorso(tuple(conv_channels), tuple(hidden_sizes))
  else:
    torso = networks.MLPTorso(tuple(hidden_sizes), max(len(shape), 1))
  network = PolicyQNetwork(torso, num_actions=int(spec.actions.num_values))
  network(tf.zeros((1,) + shape))
  return network


def network_for(spec: Any, config: Any) -> snt.Module:
  """The network of a selfplay `Config` (its `use_lstm`, sizes)."""
  return make_network(spec, config.hidden_sizes,
                      config.lstm_size if config.use_lstm else None,
                      config.conv_channels)


def is_recurrent(network: snt.Module) -> bool:
  return isinstance(network, networks.RecurrentPolicyValueNetwork)


def masked_logits(logits: tf.Tensor, legal: tf.Tensor) -> tf.Tensor:
  """Illegal actions (legal == 0) at -1e9."""
  return tf.where(legal > 0, logits, tf.fill(tf.shape(logits), -1e9))
