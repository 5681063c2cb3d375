"""Orthogonally initialised MLPs and Stable-Baselines3's policy-value network.

SB3's `ActorCriticPolicy` (`MlpPolicy`, discrete actions, `ortho_init=True`)
is two MLPs that share nothing, each `hidden_sizes` wide with tanh, and two
linear outputs; every weight matrix is orthogonal (Saxe et al. 2014, "Exact
solutions to the nonlinear dynamics of learning in deep linear neural
networks") with a gain per layer, every bias 0:

| layer | gain |
|---|---|
| hidden layers of both MLPs | √2 |
| policy logits | 0.01 (a near-uniform first policy) |
| value | 1 |

    network = separate_mlp.SeparatePolicyValueNetwork(num_actions=2)
    output = network(observation)        # PolicyValueOutput(logits, value)

`policy_value_mlp(kind, ...)` builds either this (`'separate_tanh'`) or the
shared-torso network of `policy_value.py` (`'shared_relu'`) by name, for
agents that choose it in their config.
"""

import math
from typing import Callable, Optional, Sequence, Tuple

import sonnet as snt
import tensorflow as tf

from repertory.components.networks import batching
from repertory.components.networks import heads
from repertory.components.networks import policy_value
from repertory.components.networks import torsos

# One ReLU MLP torso shared by policy and value (Sonnet's default
# initialisation): `policy_value.PolicyValueNetwork` over `torsos.MLPTorso`.
SHARED_RELU = 'shared_relu'
# SB3's `MlpPolicy`: `SeparatePolicyValueNetwork`.
SEPARATE_TANH = 'separate_tanh'
KINDS = (SHARED_RELU, SEPARATE_TANH)

HIDDEN_GAIN = math.sqrt(2.0)
POLICY_GAIN = 0.01
VALUE_GAIN = 1.0


def orthogonal_linear(output_size: int, gain: float,
                      name: Optional[str] = None) -> snt.Linear:
  """A linear layer with an orthogonal weight matrix times `gain`, bias 0."""
  return snt.Linear(int(output_size),
                    w_init=snt.initializers.Orthogonal(gain=float(gain)),
                    b_init=snt.initializers.Zeros(), name=name)


class OrthogonalMLP(snt.Module):
  """`[..., *obs]` -> `[..., output_sizes[-1]]`: orthogonal linear layers.

  Observations with `obs_rank` trailing dimensions are flattened (integer
  inputs scaled to [0, 1], as `torsos.MLPTorso`); the leading dimensions
  (`[B]` or `[T, B]`) are merged for the layers and restored after.
  """

  def __init__(self, output_sizes: Sequence[int], gains: Sequence[float],
               obs_rank: int = 1,
               activation: Callable[[tf.Tensor], tf.Tensor] = tf.tanh,
               activate_final: bool = False, name: Optional[str] = None):
    """Builds the MLP.

    Args:
      output_sizes: the width of each layer.
      gains: each layer's orthogonal gain (one per layer).
      obs_rank: how many trailing dimensions one input has.
      activation: applied between layers (and after the last with
        `activate_final`).
      activate_final: whether the last layer is activated too.
      name: module name.
    """
    super().__init__(name=name)
    if not output_sizes or any(int(s) <= 0 for s in output_sizes):
      raise ValueError(f'OrthogonalMLP: output_sizes must be a non-empty '
                       f'list of positive ints, got {output_sizes!r}.')
    if len(gains) != len(output_sizes):
      raise ValueError(f'OrthogonalMLP: one gain per layer, got '
                       f'{len(gains)} gains for {len(output_sizes)} layers.')
    if obs_rank < 1:
      raise ValueError(f'OrthogonalMLP: obs_rank must be >= 1, got '
                       f'{obs_rank}.')
    self._layers = [orthogonal_linear(size, gain, name=f'linear_{i}')
                    for i, (size, gain) in enumerate(zip(output_sizes, gains))]
    self._activation = activation
    self._activate_final = activate_final
    self._obs_rank = obs_rank

  def _forward(self, x: tf.Tensor) -> tf.Tensor:
    size = x.shape[1:].num_elements()
    if size is None:
      raise ValueError(f'Observation shape must be static, got {x.shape}.')
    x = tf.reshape(x, [-1, size])
    for i, layer in enumerate(self._layers):
      x = layer(x)
      if i < len(self._layers) - 1 or self._activate_final:
        x = self._activation(x)
    return x

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    x = torsos._to_float(observation)  # pylint: disable=protected-access
    return batching.apply_over_leading_dims(self._forward, x, self._obs_rank)


class SeparatePolicyValueNetwork(snt.Module):
  """SB3's `MlpPolicy` for discrete actions (see the module docstring).

  Same interface as `policy_value.PolicyValueNetwork`: `net(obs)` on `[B, ...]`
  and `[T, B, ...]`, `initial_state` and `unroll` with an empty state.
  """

  def __init__(self, num_actions: int, hidden_sizes: Sequence[int] = (64, 64),
               obs_rank: int = 1,
               activation: Callable[[tf.Tensor], tf.Tensor] = tf.tanh,
               hidden_gain: float = HIDDEN_GAIN,
               policy_gain: float = POLICY_GAIN,
               value_gain: float = VALUE_GAIN, name: Optional[str] = None):
    """Builds the network.

    Args:
      num_actions: number of discrete actions (the logits' width).
      hidden_sizes: widths of the hidden layers of each MLP.
      obs_rank: how many trailing dimensions one observation has.
      activation: the hidden layers' nonlinearity.
      hidden_gain: orthogonal gain of every hidden layer.
      policy_gain: orthogonal gain of the logits layer.
      value_gain: orthogonal gain of the value layer.
      name: module name.
    """
    super().__init__(name=name)
    if int(num_actions) <= 0:
      raise ValueError(f'SeparatePolicyValueNetwork: num_actions must be a '
                       f'positive int, got {num_actions!r}.')
    hidden = [int(h) for h in hidden_sizes]
    gains = [hidden_gain] * len(hidden)
    self._policy = OrthogonalMLP(hidden + [int(num_actions)],
                                 gains + [policy_gain], obs_rank, activation,
                                 name='policy')
    self._value = OrthogonalMLP(hidden + [1], gains + [value_gain], obs_rank,
                                activation, name='value')
    self.num_actions = int(num_actions)

  def __call__(self, observation: tf.Tensor) -> heads.PolicyValueOutput:
    return heads.PolicyValueOutput(
        logits=self._policy(observation),
        value=tf.squeeze(self._value(observation), axis=-1))

  def initial_state(self, batch_size: int) -> Tuple[()]:
    del batch_size
    return ()

  def unroll(self, observation: tf.Tensor, state: Tuple[()] = (),
             reset: Optional[tf.Tensor] = None
             ) -> Tuple[heads.PolicyValueOutput, Tuple[()]]:
    """`[T, B, ...]` -> (outputs `[T, B, ...]`, `()`); no state to reset."""
    del reset
    return self(observation), state


def policy_value_mlp(kind: str, hidden_sizes: Sequence[int], obs_rank: int,
                     num_actions: int) -> snt.Module:
  """The discrete policy-value network named `kind` (one of `KINDS`), its
  variables not yet created."""
  if kind == SHARED_RELU:
    return policy_value.PolicyValueNetwork(
        torsos.MLPTorso(tuple(hidden_sizes), obs_rank=obs_rank),
        num_actions=num_actions)
  if kind == SEPARATE_TANH:
    return SeparatePolicyValueNetwork(num_actions, hidden_sizes, obs_rank)
  raise ValueError(f'policy_value_mlp: unknown network {kind!r}; choose '
                   f'from {", ".join(KINDS)}.')
