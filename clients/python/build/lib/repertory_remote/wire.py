"""Specs and tensors on the wire: numpy <-> `environment.proto` messages.

Shared by the client library and the service; imports neither TensorFlow
nor anything of repertory beyond the generated messages.
"""

import dataclasses
from typing import Optional, Sequence, Tuple

import numpy as np

from repertory_remote import environment_pb2 as pb

# Observation dtypes a remote client may declare.
DTYPES = ('float32', 'float64', 'uint8', 'int8', 'int32', 'int64', 'bool')
METADATA_KEY = 'authorization'
TOKEN_ENV_VAR = 'REPERTORY_REMOTE_TOKEN'


class FieldError(ValueError):
  """A message field with a bad value; `field` names it ('step.reward')."""

  def __init__(self, field: str, message: str):
    super().__init__(f'{field}: {message}')
    self.field = field


@dataclasses.dataclass(frozen=True)
class Specs:
  """What the agent and a remote client agree on: one observation tensor and
  `num_actions` discrete actions."""
  observation_shape: Tuple[int, ...]
  observation_dtype: str
  num_actions: int

  def __post_init__(self):
    if self.observation_dtype not in DTYPES:
      raise FieldError('specs.observation.dtype',
                       f'{self.observation_dtype!r} is not one of {DTYPES}')
    if any(int(d) < 1 for d in self.observation_shape):
      raise FieldError('specs.observation.shape',
                       f'{list(self.observation_shape)} has a dimension < 1')
    if self.num_actions < 1:
      raise FieldError('specs.num_actions',
                       f'{self.num_actions} must be >= 1')

  @property
  def observation_size(self) -> int:
    return int(np.prod(self.observation_shape, dtype=np.int64))

  def to_proto(self) -> pb.Specs:
    return pb.Specs(
        observation=pb.TensorSpec(shape=list(self.observation_shape),
                                  dtype=self.observation_dtype),
        num_actions=self.num_actions)

  @classmethod
  def from_proto(cls, message: pb.Specs, field: str = 'specs') -> 'Specs':
    if not message.HasField('observation'):
      raise FieldError(f'{field}.observation', 'missing')
    return cls(tuple(int(d) for d in message.observation.shape),
               message.observation.dtype or 'float32',
               int(message.num_actions))

  @classmethod
  def from_dm_env(cls, observation_spec, action_spec) -> 'Specs':
    """From dm_env specs: one observation array, a `DiscreteArray` action."""
    num_values = getattr(action_spec, 'num_values', None)
    if num_values is None:
      raise ValueError(
          'Remote environments need a discrete action spec '
          f'(dm_env.specs.DiscreteArray), got {action_spec!r}.')
    if not hasattr(observation_spec, 'shape'):
      raise ValueError('Remote environments need one observation array, got '
                       f'{observation_spec!r}.')
    return cls(tuple(int(d) for d in observation_spec.shape),
               np.dtype(observation_spec.dtype).name, int(num_values))


def mismatch(client: Specs, agent: Specs) -> Optional[str]:
  """None if the specs agree, else 'hello.specs.<field>: client X, agent Y'."""
  for field, mine, theirs in (
      ('observation.shape', list(client.observation_shape),
       list(agent.observation_shape)),
      ('observation.dtype', client.observation_dtype, agent.observation_dtype),
      ('num_actions', client.num_actions, agent.num_actions)):
    if mine != theirs:
      return f'hello.specs.{field}: the client has {mine}, the agent {theirs}'
  return None


def tensor_to_proto(array: np.ndarray, dtype: str) -> pb.Tensor:
  """Raw little-endian bytes of `array` as `dtype` (the compact form)."""
  array = np.asarray(array, dtype=np.dtype(dtype).newbyteorder('<'))
  return pb.Tensor(data=array.tobytes())


def tensor_from_proto(message: pb.Tensor, specs: Specs,
                      field: str) -> np.ndarray:
  """The observation of `message` in the spec's shape and dtype; raises
  FieldError naming `field` for a wrong size, both or neither of
  values/data, or non-finite floats."""
  dtype = np.dtype(specs.observation_dtype)
  size = specs.observation_size
  if len(message.values) and message.data:
    raise FieldError(field, 'give one of values and data, not both')
  if message.data:
    expected = size * dtype.itemsize
    if len(message.data) != expected:
      raise FieldError(f'{field}.data', f'{len(message.data)} bytes, expected '
                       f'{expected} ({size} x {dtype.name})')
    array = np.frombuffer(message.data, dtype=dtype.newbyteorder('<'))
    array = array.astype(dtype)
  else:
    if len(message.values) != size:
      raise FieldError(f'{field}.values', f'{len(message.values)} values, '
                       f'expected {size} (shape {list(specs.observation_shape)})')
    values = np.asarray(message.values, dtype=np.float64)
    if dtype.kind in 'iub' and not np.all(values == np.round(values)):
      raise FieldError(f'{field}.values', f'non-integer values for dtype '
                       f'{dtype.name}')
    array = values.astype(dtype)
  if dtype.kind == 'f' and not np.all(np.isfinite(array)):
    raise FieldError(field, 'holds NaN or infinite values')
  return array.reshape(specs.observation_shape)


def mask_from_proto(values: Sequence[bool], num_actions: int,
                    field: str) -> Optional[np.ndarray]:
  """The legal-action mask, or None when absent."""
  if not len(values):
    return None
  if len(values) != num_actions:
    raise FieldError(field, f'{len(values)} values, expected {num_actions}')
  mask = np.asarray(values, dtype=bool)
  if not mask.any():
    raise FieldError(field, 'no action is legal')
  return mask
