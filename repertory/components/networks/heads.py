"""Heads: embedding `[..., D]` -> policy logits / values / Q-values.

Heads act on the last axis only, so they serve `[B, D]` and `[T, B, D]`.
"""

from typing import NamedTuple, Optional, Sequence

import sonnet as snt
import tensorflow as tf

from repertory.components.networks import batching


class PolicyValueOutput(NamedTuple):
  """Discrete policy and state value.

  Attributes:
    logits: `[..., num_actions]` unnormalised log-probabilities.
    value: `[...]` state value V(x).
  """
  logits: tf.Tensor
  value: tf.Tensor


class GaussianPolicyValueOutput(NamedTuple):
  """Diagonal Gaussian policy and state value.

  Attributes:
    mean: `[..., action_size]` mean action.
    stddev: `[..., action_size]` standard deviation (state-independent).
    value: `[...]` state value V(x).
  """
  mean: tf.Tensor
  stddev: tf.Tensor
  value: tf.Tensor


def _check_positive(cls: str, name: str, value: int) -> None:
  if int(value) <= 0:
    raise ValueError(f'{cls}: {name} must be a positive int, got {value!r}.')


class PolicyValueHead(snt.Module):
  """Linear policy logits and linear value from one embedding (IMPALA/A3C)."""

  def __init__(self, num_actions: int, name: Optional[str] = None):
    super().__init__(name=name)
    _check_positive('PolicyValueHead', 'num_actions', num_actions)
    self._policy = snt.Linear(num_actions, name='policy')
    self._value = snt.Linear(1, name='value')
    self.num_actions = num_actions

  def __call__(self, embedding: tf.Tensor,
               value_embedding: Optional[tf.Tensor] = None
               ) -> PolicyValueOutput:
    """The value reads `value_embedding` if given (a separate value torso)."""
    logits = batching.apply_over_leading_dims(self._policy, embedding, 1)
    value = batching.apply_over_leading_dims(
        lambda x: tf.squeeze(self._value(x), axis=-1),
        embedding if value_embedding is None else value_embedding, 1)
    return PolicyValueOutput(logits=logits, value=value)


class GaussianPolicyValueHead(snt.Module):
  """Gaussian policy (learned state-independent log-std) and value (PPO)."""

  def __init__(self, action_size: int, init_log_std: float = 0.0,
               name: Optional[str] = None):
    super().__init__(name=name)
    _check_positive('GaussianPolicyValueHead', 'action_size', action_size)
    self._mean = snt.Linear(action_size, name='mean')
    self._value = snt.Linear(1, name='value')
    self.log_std = tf.Variable(
        tf.fill([action_size], float(init_log_std)), name='log_std')

  def __call__(self, embedding: tf.Tensor,
               value_embedding: Optional[tf.Tensor] = None
               ) -> GaussianPolicyValueOutput:
    """The value reads `value_embedding` if given (a separate value torso)."""
    mean = batching.apply_over_leading_dims(self._mean, embedding, 1)
    value = batching.apply_over_leading_dims(
        lambda x: tf.squeeze(self._value(x), -1),
        embedding if value_embedding is None else value_embedding, 1)
    stddev = tf.exp(self.log_std) * tf.ones_like(mean)
    return GaussianPolicyValueOutput(mean=mean, stddev=stddev, value=value)


class QHead(snt.Module):
  """An MLP from embedding to one Q-value per action."""

  def __init__(self, num_actions: int, hidden_sizes: Sequence[int] = (),
               name: Optional[str] = None):
    super().__init__(name=name)
    _check_positive('QHead', 'num_actions', num_actions)
    self._mlp = snt.nets.MLP(list(hidden_sizes) + [num_actions])
    self.num_actions = num_actions

  def __call__(self, embedding: tf.Tensor) -> tf.Tensor:
    return batching.apply_over_leading_dims(self._mlp, embedding, 1)


class DuelingQHead(snt.Module):
  """Dueling Q head (Wang et al. 2016, "Dueling Network Architectures for
  Deep Reinforcement Learning", eq. 9): Q = V + A - mean_a A.
  """

  def __init__(self, num_actions: int, hidden_sizes: Sequence[int] = (512,),
               name: Optional[str] = None):
    super().__init__(name=name)
    _check_positive('DuelingQHead', 'num_actions', num_actions)
    self._value = snt.nets.MLP(list(hidden_sizes) + [1], name='value')
    self._advantage = snt.nets.MLP(list(hidden_sizes) + [num_actions],
                                   name='advantage')
    self.num_actions = num_actions

  def _forward(self, x: tf.Tensor) -> tf.Tensor:
    value = self._value(x)  # [N, 1]
    advantage = self._advantage(x)  # [N, A]
    return value + advantage - tf.reduce_mean(advantage, -1, keepdims=True)

  def __call__(self, embedding: tf.Tensor) -> tf.Tensor:
    return batching.apply_over_leading_dims(self._forward, embedding, 1)
