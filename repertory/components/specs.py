"""Environment specs as networks need them (no TensorFlow).

The spec of a run's environment is computed once, when its program is built
(`repertory.experiment.environment_spec`), and handed to every node.
"""


from typing import Any, NamedTuple

import dm_env
from dm_env import specs
import numpy as np


# Torsos an agent's `Config.torso` may name: 'mlp' (an MLP over the flattened
# observation), 'minatar' (the MinAtar paper's conv 16 3x3 + linear 128,
# `networks.MinAtarTorso`), 'auto' (`resolve_torso`).
TORSOS = ('auto', 'mlp', 'minatar')


def resolve_torso(torso: str, observation_spec: Any) -> str:
  """The torso `torso` (one of TORSOS) names for observations of
  `observation_spec`: 'auto' is 'minatar' for boolean observations of rank
  3 (MinAtar's `[10, 10, C]` boards) and 'mlp' otherwise; 'minatar' over
  observations that are not `[H, W, C]` is refused."""
  if torso not in TORSOS:
    raise ValueError(f'Config.torso={torso!r}; choose one of {TORSOS}.')
  shape = tuple(observation_spec.shape)
  if torso == 'auto':
    return 'minatar' if (len(shape) == 3 and
                         observation_spec.dtype == bool) else 'mlp'
  if torso == 'minatar' and len(shape) != 3:
    raise ValueError(
        "Config.torso='minatar' convolves [H, W, C] boards; the observations "
        f"have shape {shape}; set --config.torso=mlp (or auto).")
  return torso


class EnvironmentSpec(NamedTuple):
  """The specs of an environment (Acme's `EnvironmentSpec`)."""
  observations: Any
  actions: Any
  rewards: Any
  discounts: Any


def make_environment_spec(environment: dm_env.Environment) -> EnvironmentSpec:
  """Returns the `EnvironmentSpec` of a dm_env environment."""
  return EnvironmentSpec(
      observations=environment.observation_spec(),
      actions=environment.action_spec(),
      rewards=environment.reward_spec(),
      discounts=environment.discount_spec())


def num_actions(action_spec: specs.Array) -> int:
  """The number of discrete actions, or a clear error for other specs."""
  if isinstance(action_spec, specs.DiscreteArray):
    return int(action_spec.num_values)
  if (isinstance(action_spec, specs.BoundedArray) and action_spec.shape == ()
      and np.issubdtype(action_spec.dtype, np.integer)):
    return int(action_spec.maximum) - int(action_spec.minimum) + 1
  raise ValueError('This agent takes a single discrete action; got the '
                   f'action spec {action_spec!r}.')

