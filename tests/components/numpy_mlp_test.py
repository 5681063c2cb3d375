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
