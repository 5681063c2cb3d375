"""MLPs of a learner's weights, evaluated in numpy (no TensorFlow).

An actor's network is a few small matrix products per step; these read the
weights as `networks.get_variables` names them and apply them:

    torso = numpy_mlp.layers(weights, 'torso/mlp/layers')   # [(w, b), ...]
    x = numpy_mlp.apply(x, torso, numpy_mlp.ACTIVATIONS['relu'],
                        activate_final=True)

Used by `actor_critic.numpy_policy` (PPO's, A3C's and IMPALA's actors) and
`league.MLPPolicy` (self-play opponents), which also applies the 3x3
convolutions of a `networks.BoardTorso` (`board_convs`); `minatar_torso`
applies a `networks.MinAtarTorso`.
"""

import re
from typing import Callable, Dict, List, Mapping, Tuple

import numpy as np

Layer = Tuple[np.ndarray, np.ndarray]
_INDEXED = re.compile(r'(.+)/(\d+)/w')

ACTIVATIONS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    'relu': lambda x: np.maximum(x, 0.0), 'tanh': np.tanh}


def layers(weights: Mapping[str, np.ndarray], prefix: str) -> List[Layer]:
  """The float32 `(w, b)` of `<prefix>/<i>/w` and `<prefix>/<i>/b` for
  i = 0, 1, ..., in order of i ([] if there are none)."""
  found = sorted((int(m.group(2)), name) for name in weights
                 if (m := _INDEXED.fullmatch(name)) and m.group(1) == prefix)
  return [(np.asarray(weights[name], np.float32),
           np.asarray(weights[name[:-1] + 'b'], np.float32))
          for _, name in found]


def apply(x: np.ndarray, mlp_layers: List[Layer],
          activation: Callable[[np.ndarray], np.ndarray],
          activate_final: bool) -> np.ndarray:
  """`x @ w + b` for each layer, `activation` after each but the last (and
  after the last too with `activate_final`)."""
  for i, (w, b) in enumerate(mlp_layers):
    x = x @ w + b
    if activate_final or i < len(mlp_layers) - 1:
      x = activation(x)
  return x


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray,
           padding: str = 'SAME') -> np.ndarray:
  """Sonnet's `Conv2D` (stride 1) in numpy: `[B, H, W, in]` -> `[B, H', W',
  out]` with w `[kh, kw, in, out]` as Sonnet holds it (odd kernel sizes);
  'SAME' keeps H and W, 'VALID' gives H - kh + 1, W - kw + 1. No
  activation."""
  if padding not in ('SAME', 'VALID'):
    raise ValueError(f'conv2d: padding={padding!r}; choose SAME or VALID.')
  kh, kw = w.shape[:2]
  if padding == 'SAME':
    x = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
  height, width = x.shape[1] - kh + 1, x.shape[2] - kw + 1
  patches = np.concatenate(  # [B, H', W', kh * kw * in], (row, col, in).
      [x[:, i:i + height, j:j + width, :]
       for i in range(kh) for j in range(kw)], axis=-1)
  return patches @ w.reshape(-1, w.shape[-1]) + b


def board_convs(planes: np.ndarray, conv_layers: List[Layer]) -> np.ndarray:
  """`networks.BoardTorso`'s convolutions: `[B, C, H, W]` planes -> conv 3x3
  SAME + ReLU per layer ((w `[3, 3, in, out]`, b) as Sonnet's Conv2D holds
  them) -> `[B, H * W * out]`, flattened as TensorFlow flattens NHWC."""
  x = np.transpose(np.asarray(planes, np.float32), (0, 2, 3, 1))
  for w, b in conv_layers:
    x = np.maximum(conv2d(x, w, b, 'SAME'), 0.0)
  return x.reshape(len(x), -1)


def minatar_torso(boards: np.ndarray, weights: Mapping[str, np.ndarray],
                  prefix: str = 'torso') -> np.ndarray:
  """`networks.MinAtarTorso` of `weights` (`<prefix>/conv/{w,b}`,
  `<prefix>/linear/{w,b}`): `[B, H, W, C]` boards -> `[B, output_size]`."""
  get = lambda name: np.asarray(weights[f'{prefix}/{name}'], np.float32)
  x = np.maximum(conv2d(np.asarray(boards, np.float32), get('conv/w'),
                        get('conv/b'), 'VALID'), 0.0)
  return np.maximum(
      x.reshape(len(x), -1) @ get('linear/w') + get('linear/b'), 0.0)
