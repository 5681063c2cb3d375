"""Torsos: shapes, and the same weights on [B] and [T, B] inputs."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import networks

T, B = 3, 2


def _same_on_steps_and_unroll(module, obs):
  unrolled = module(obs).numpy()
  for t in range(obs.shape[0]):
    np.testing.assert_allclose(module(obs[t]).numpy(), unrolled[t],
                               rtol=1e-5, atol=1e-5)
  return unrolled


def test_mlp_torso():
  torso = networks.MLPTorso(hidden_sizes=(16, 8))
  obs = np.random.default_rng(0).normal(size=(T, B, 4)).astype(np.float32)
  out = _same_on_steps_and_unroll(torso, obs)
  assert out.shape == (T, B, 8)
  assert torso.output_size == 8
  assert (out >= 0).all()  # activate_final


def test_mlp_torso_flattens_images_with_obs_rank():
  torso = networks.MLPTorso(hidden_sizes=(8,), obs_rank=3)
  obs = np.zeros((T, B, 10, 10, 4), np.float32)
  assert torso(obs).shape == (T, B, 8)
  assert torso(obs[0]).shape == (B, 8)


def test_mlp_torso_rejects_bad_sizes():
  with pytest.raises(ValueError, match='hidden_sizes'):
    networks.MLPTorso(hidden_sizes=())


def test_atari_torso_on_uint8_frames():
  torso = networks.AtariTorso()
  rng = np.random.default_rng(1)
  obs = rng.integers(0, 256, size=(2, B, 84, 84, 4)).astype(np.uint8)
  out = _same_on_steps_and_unroll(torso, obs)
  assert out.shape == (2, B, 512)
  # uint8 frames are scaled to [0, 1]: same as feeding the scaled floats.
  np.testing.assert_allclose(torso(obs[0]), torso(obs[0] / 255.0), rtol=1e-5,
                             atol=1e-5)
  conv_shapes = [v.shape.as_list() for v in torso.variables if 'w' in v.name
                 and len(v.shape) == 4]
  assert sorted(conv_shapes) == sorted(
      [[8, 8, 4, 32], [4, 4, 32, 64], [3, 3, 64, 64]])


def test_resnet_torso():
  torso = networks.ResNetTorso(channels=(4, 8), blocks_per_section=(1, 2),
                               output_size=32)
  obs = np.random.default_rng(2).integers(
      0, 256, size=(2, B, 24, 24, 3)).astype(np.uint8)
  out = _same_on_steps_and_unroll(torso, obs)
  assert out.shape == (2, B, 32)
  num_convs = sum(1 for v in torso.variables if len(v.shape) == 4)
  assert num_convs == 2 + 2 * (1 + 2)  # section convs + 2 per block


def test_resnet_torso_rejects_mismatched_sections():
  with pytest.raises(ValueError, match='blocks_per_section'):
    networks.ResNetTorso(channels=(16, 32), blocks_per_section=(2,))


def test_board_torso_keeps_the_board_layout():
  torso = networks.BoardTorso(channels=(4,), hidden_sizes=(8,))
  out = torso(tf.zeros((2, 5, 3, 6, 7)))  # [T, B, C, H, W].
  assert out.shape == (2, 5, 8)
  # A piece in one corner changes exactly the conv outputs that see it: with
  # 3x3 SAME convolutions a single layer reaches one cell around it.
  board = np.zeros((1, 3, 6, 7), np.float32)
  board[0, 0, 0, 0] = 1.0
  x = tf.transpose(tf.constant(board), [0, 2, 3, 1])
  conv = torso._convs[0]
  changed = np.abs((conv(x) - conv(tf.zeros_like(x))).numpy()).sum(-1)[0]
  assert set(map(tuple, np.argwhere(changed > 0))) == {
      (0, 0), (0, 1), (1, 0), (1, 1)}
  with pytest.raises(ValueError, match='must be non-empty lists of positive'):
    networks.BoardTorso(channels=(), hidden_sizes=(8,))
