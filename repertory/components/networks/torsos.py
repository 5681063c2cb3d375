"""Torsos: observation -> embedding, for any leading dims (`[B]` or `[T, B]`).

Each torso maps `[..., *observation_shape]` to `[..., output_size]`, merging
the leading dimensions internally, so one set of weights serves acting
(`[B, ...]`) and learning (`[T, B, ...]`).
"""

from typing import Callable, Optional, Sequence

import sonnet as snt
import tensorflow as tf

from repertory.components.networks import batching


def _to_float(observation: tf.Tensor) -> tf.Tensor:
  """Integer (e.g. uint8 pixel) inputs are scaled to [0, 1]; floats kept."""
  observation = tf.convert_to_tensor(observation)
  if observation.dtype.is_integer:
    return tf.cast(observation, tf.float32) / 255.0
  return tf.cast(observation, tf.float32)


def _flatten(x: tf.Tensor) -> tf.Tensor:
  """[N, *dims] -> [N, prod(dims)], keeping the static size for snt.Linear."""
  size = x.shape[1:].num_elements()
  if size is None:
    raise ValueError(f'Observation shape must be static, got {x.shape}.')
  return tf.reshape(x, [-1, size])


class MLPTorso(snt.Module):
  """A multi-layer perceptron over flattened observations.

  Observations of shape `[..., *obs_shape]` with `len(obs_shape) == obs_rank`
  are flattened to `[..., prod(obs_shape)]` (no pixel rescaling: inputs are
  cast to float32 as they are).
  """

  def __init__(self,
               hidden_sizes: Sequence[int] = (64, 64),
               obs_rank: int = 1,
               activation: Callable[[tf.Tensor], tf.Tensor] = tf.nn.relu,
               activate_final: bool = True,
               name: Optional[str] = None):
    """Builds the torso.

    Args:
      hidden_sizes: the width of each layer; the last is the output size.
      obs_rank: how many trailing dimensions one observation has (1 for a
        vector like CartPole's, 3 for an image to be flattened).
      activation: nonlinearity between (and, if activate_final, after) layers.
      activate_final: whether to apply `activation` to the output.
      name: module name.
    """
    super().__init__(name=name)
    if not hidden_sizes or any(int(h) <= 0 for h in hidden_sizes):
      raise ValueError(
          f'MLPTorso: hidden_sizes must be a non-empty list of positive ints, '
          f'got {hidden_sizes!r}.')
    if obs_rank < 1:
      raise ValueError(f'MLPTorso: obs_rank must be >= 1, got {obs_rank}.')
    self._obs_rank = obs_rank
    self._mlp = snt.nets.MLP([int(h) for h in hidden_sizes],
                             activation=activation,
                             activate_final=activate_final)
    self.output_size = int(hidden_sizes[-1])

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    """`[..., *obs]` -> `[..., hidden_sizes[-1]]`."""
    x = _to_float(observation)
    return batching.apply_over_leading_dims(
        lambda flat: self._mlp(_flatten(flat)), x, self._obs_rank)


class AtariTorso(snt.Module):
  """The Nature-DQN torso (Mnih et al. 2015, "Human-level control through
  deep reinforcement learning", Methods: model architecture).

  Conv 32 8x8 stride 4 -> conv 64 4x4 stride 2 -> conv 64 3x3 stride 1 (all
  ReLU, VALID padding) -> linear 512 + ReLU. Input `[..., 84, 84, 4]`; uint8
  frames are scaled to [0, 1].
  """

  def __init__(self, output_size: int = 512, name: Optional[str] = None):
    super().__init__(name=name)
    self._convs = [
        snt.Conv2D(32, kernel_shape=8, stride=4, padding='VALID'),
        snt.Conv2D(64, kernel_shape=4, stride=2, padding='VALID'),
        snt.Conv2D(64, kernel_shape=3, stride=1, padding='VALID'),
    ]
    self._linear = snt.Linear(output_size)
    self.output_size = output_size

  def _forward(self, images: tf.Tensor) -> tf.Tensor:
    x = images
    for conv in self._convs:
      x = tf.nn.relu(conv(x))
    return tf.nn.relu(self._linear(_flatten(x)))

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    """`[..., H, W, C]` -> `[..., output_size]`."""
    return batching.apply_over_leading_dims(
        self._forward, _to_float(observation), event_rank=3)


class MinAtarTorso(snt.Module):
  """The MinAtar paper's network (Young & Tian 2019, "MinAtar: An
  Atari-Inspired Testbed for Thorough and Reproducible Reinforcement
  Learning Experiments", section 4): conv `channels` 3x3 stride 1 VALID +
  ReLU over the `[..., H, W, C]` board -> flatten -> linear `output_size` +
  ReLU. Boolean boards are cast to 0/1. Actors apply its weights in numpy
  ('torso/conv/{w,b}', 'torso/linear/{w,b}': `numpy_mlp.conv2d`).
  """

  def __init__(self, channels: int = 16, output_size: int = 128,
               name: Optional[str] = None):
    super().__init__(name=name)
    if int(channels) < 1 or int(output_size) < 1:
      raise ValueError(
          f'MinAtarTorso: channels={channels!r} and output_size='
          f'{output_size!r} must be positive ints.')
    self._conv = snt.Conv2D(int(channels), kernel_shape=3, stride=1,
                            padding='VALID')
    self._linear = snt.Linear(int(output_size))
    self.output_size = int(output_size)

  def _forward(self, boards: tf.Tensor) -> tf.Tensor:
    x = tf.nn.relu(self._conv(boards))
    return tf.nn.relu(self._linear(_flatten(x)))

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    """`[..., H, W, C]` -> `[..., output_size]`."""
    return batching.apply_over_leading_dims(
        self._forward, _to_float(observation), event_rank=3)


def check_board_planes(conv_channels: Sequence[int], shape: Sequence[int],
                       game: str = 'this game') -> None:
  """Refuses `BoardTorso` convolutions (an agent's `Config.conv_channels`)
  over observations of `shape` that are not board planes `[C, H, W]`."""
  if conv_channels and len(shape) != 3:
    raise ValueError(
        f'Config.conv_channels={tuple(conv_channels)} convolves board planes '
        f'[C, H, W]; {game} gives observations of shape {tuple(shape)}; set '
        "--config.conv_channels='()' for an MLP.")


class BoardTorso(snt.Module):
  """Convolutions over a board game's planes, then an MLP: conv 3x3 SAME +
  ReLU for each of `channels` -> flatten -> MLP `hidden_sizes` (ReLU after
  every layer). Input `[..., C, H, W]`, planes first as OpenSpiel's
  observation tensors (Connect Four's `[3, 6, 7]`). `league.MLPPolicy`
  plays its weights in numpy ('torso/convs/<i>/w', 'torso/mlp/layers/...').
  """

  def __init__(self, channels: Sequence[int] = (32, 32),
               hidden_sizes: Sequence[int] = (256,),
               name: Optional[str] = None):
    super().__init__(name=name)
    if (not channels or not hidden_sizes or
        any(int(c) <= 0 for c in tuple(channels) + tuple(hidden_sizes))):
      raise ValueError(
          f'BoardTorso: channels {tuple(channels)} and hidden_sizes '
          f'{tuple(hidden_sizes)} must be non-empty lists of positive ints.')
    self._convs = [snt.Conv2D(int(c), kernel_shape=3, padding='SAME')
                   for c in channels]
    self._mlp = snt.nets.MLP([int(h) for h in hidden_sizes],
                             activate_final=True)
    self.output_size = int(hidden_sizes[-1])

  def _forward(self, planes: tf.Tensor) -> tf.Tensor:
    x = tf.transpose(planes, [0, 2, 3, 1])  # [N, C, H, W] -> [N, H, W, C].
    for conv in self._convs:
      x = tf.nn.relu(conv(x))
    return self._mlp(_flatten(x))

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    """`[..., C, H, W]` -> `[..., hidden_sizes[-1]]`."""
    return batching.apply_over_leading_dims(
        self._forward, _to_float(observation), event_rank=3)


class _ResidualBlock(snt.Module):
  """relu -> conv 3x3 -> relu -> conv 3x3, plus the input."""

  def __init__(self, channels: int, name: Optional[str] = None):
    super().__init__(name=name)
    self._conv0 = snt.Conv2D(channels, kernel_shape=3, stride=1,
                             padding='SAME')
    self._conv1 = snt.Conv2D(channels, kernel_shape=3, stride=1,
                             padding='SAME')

  def __call__(self, x: tf.Tensor) -> tf.Tensor:
    out = self._conv0(tf.nn.relu(x))
    out = self._conv1(tf.nn.relu(out))
    return x + out


class ResNetTorso(snt.Module):
  """The IMPALA deep ResNet torso (Espeholt et al. 2018, figure 3, right).

  For each section: conv 3x3 -> max-pool 3x3 stride 2 -> residual blocks;
  then ReLU -> flatten -> linear `output_size` + ReLU. Input
  `[..., H, W, C]`; integer frames are scaled to [0, 1].
  """

  def __init__(self,
               channels: Sequence[int] = (16, 32, 32),
               blocks_per_section: Sequence[int] = (2, 2, 2),
               output_size: int = 256,
               name: Optional[str] = None):
    super().__init__(name=name)
    if len(channels) != len(blocks_per_section):
      raise ValueError(
          f'ResNetTorso: channels {tuple(channels)} and blocks_per_section '
          f'{tuple(blocks_per_section)} must have the same length.')
    self._first_convs = [
        snt.Conv2D(c, kernel_shape=3, stride=1, padding='SAME')
        for c in channels]
    self._blocks = [[_ResidualBlock(c) for _ in range(n)]
                    for c, n in zip(channels, blocks_per_section)]
    self._linear = snt.Linear(output_size)
    self.output_size = output_size

  def _forward(self, images: tf.Tensor) -> tf.Tensor:
    x = images
    for conv, blocks in zip(self._first_convs, self._blocks):
      x = conv(x)
      x = tf.nn.pool(x, window_shape=[3, 3], pooling_type='MAX',
                     padding='SAME', strides=[2, 2])
      for block in blocks:
        x = block(x)
    x = _flatten(tf.nn.relu(x))
    return tf.nn.relu(self._linear(x))

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    """`[..., H, W, C]` -> `[..., output_size]`."""
    return batching.apply_over_leading_dims(
        self._forward, _to_float(observation), event_rank=3)
