"""components.numpy_mlp: layers found by index, applied as Sonnet's MLP."""

import numpy as np
import pytest

from repertory.components import numpy_mlp


def _weights(rng, sizes, prefix='torso/mlp/layers'):
  out = {}
  for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
    out[f'{prefix}/{i}/w'] = rng.normal(size=(n_in, n_out))
    out[f'{prefix}/{i}/b'] = rng.normal(size=(n_out,))
  return out


def test_layers_are_ordered_by_their_index_not_their_name():
  rng = np.random.default_rng(0)
  sizes = [3] + [2] * 11 + [4]          # indices 0..11: '10' sorts before '2'
  weights = _weights(rng, sizes)
  weights['head/policy/w'] = rng.normal(size=(4, 2))
  layers = numpy_mlp.layers(weights, 'torso/mlp/layers')
  assert len(layers) == 12
  for i, (w, b) in enumerate(layers):
    np.testing.assert_array_equal(w, weights[f'torso/mlp/layers/{i}/w']
                                  .astype(np.float32))
    assert w.dtype == b.dtype == np.float32
  assert numpy_mlp.layers(weights, 'value_torso/mlp/layers') == []


@pytest.mark.parametrize('activation,activate_final', [
    ('relu', True), ('relu', False), ('tanh', False)])
def test_apply_matches_a_plain_loop(activation, activate_final):
  rng = np.random.default_rng(1)
  weights = _weights(rng, [5, 8, 8, 3])
  x = rng.normal(size=(4, 5)).astype(np.float32)
  expected = x.astype(np.float64)
  for i in range(3):
    expected = (expected @ weights[f'torso/mlp/layers/{i}/w'] +
                weights[f'torso/mlp/layers/{i}/b'])
    if i < 2 or activate_final:
      expected = (np.maximum(expected, 0) if activation == 'relu'
                  else np.tanh(expected))
  got = numpy_mlp.apply(x, numpy_mlp.layers(weights, 'torso/mlp/layers'),
                        numpy_mlp.ACTIVATIONS[activation], activate_final)
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def _plain_conv(x, w, b, padding):
  """Cross-correlation, one output at a time (as Sonnet's Conv2D)."""
  kh, kw, _, out = w.shape
  if padding == 'SAME':
    x = np.pad(x, ((0, 0), (kh // 2,) * 2, (kw // 2,) * 2, (0, 0)))
  batch, height, width = x.shape[0], x.shape[1] - kh + 1, x.shape[2] - kw + 1
  y = np.zeros((batch, height, width, out))
  for n in range(batch):
    for i in range(height):
      for j in range(width):
        window = x[n, i:i + kh, j:j + kw, :]
        y[n, i, j] = np.tensordot(window, w, axes=3) + b
  return y


@pytest.mark.parametrize('padding,kernel', [('VALID', 3), ('SAME', 3),
                                            ('VALID', 5)])
def test_conv2d_matches_a_plain_loop(padding, kernel):
  rng = np.random.default_rng(2)
  x = rng.normal(size=(2, 7, 6, 3)).astype(np.float32)
  w = rng.normal(size=(kernel, kernel, 3, 4)).astype(np.float32)
  b = rng.normal(size=(4,)).astype(np.float32)
  got = numpy_mlp.conv2d(x, w, b, padding)
  expected = _plain_conv(x.astype(np.float64), w, b, padding)
  assert got.shape == expected.shape
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
  with pytest.raises(ValueError, match="'FULL'"):
    numpy_mlp.conv2d(x, w, b, 'FULL')


def test_minatar_torso_is_conv_relu_then_linear_relu():
  rng = np.random.default_rng(3)
  boards = rng.random((3, 10, 10, 4)) < 0.2
  weights = {'t/conv/w': rng.normal(size=(3, 3, 4, 16)),
             't/conv/b': rng.normal(size=(16,)),
             't/linear/w': rng.normal(size=(8 * 8 * 16, 5)),
             't/linear/b': rng.normal(size=(5,))}
  conv = np.maximum(_plain_conv(boards.astype(np.float64), weights['t/conv/w'],
                                weights['t/conv/b'], 'VALID'), 0)
  expected = np.maximum(conv.reshape(3, -1) @ weights['t/linear/w']
                        + weights['t/linear/b'], 0)
  np.testing.assert_allclose(numpy_mlp.minatar_torso(boards, weights, 't'),
                             expected, rtol=1e-4, atol=1e-3)
