"""Environment specs as networks need them (no TensorFlow).

The spec of a run's environment is computed once, when its program is built
(`repertory.experiment.environment_spec`), and handed to every node.
"""


from dm_env import specs
import numpy as np


def num_actions(action_spec: specs.Array) -> int:
  """The number of discrete actions, or a clear error for other specs."""
  if isinstance(action_spec, specs.DiscreteArray):
    return int(action_spec.num_values)
  if (isinstance(action_spec, specs.BoundedArray) and action_spec.shape == ()
      and np.issubdtype(action_spec.dtype, np.integer)):
    return int(action_spec.maximum) - int(action_spec.minimum) + 1
  raise ValueError('This agent takes a single discrete action; got the '
                   f'action spec {action_spec!r}.')

