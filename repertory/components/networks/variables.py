"""Name a module's variables and move them as `{name: np.ndarray}` dicts.

The learner publishes `get_variables(network)` through its variable source;
actors call `assign_variables(network, values)`. Names are the attribute
paths inside the module (e.g. `'torso/mlp/layers/0/w'`), so they do not
depend on Sonnet's name scopes and match between two instances of the same
network class built with the same arguments, in any process.
"""

from typing import Dict, Mapping, Tuple

import numpy as np
import tensorflow as tf

from repertory.launch.process import tf_internals


def named_variables(module: tf.Module) -> Dict[str, tf.Variable]:
  """Returns `{name: tf.Variable}` for every variable of `module`, in order.

  Raises:
    ValueError: if the module has no variables yet (Sonnet modules create
      them on the first call: call the network once on a dummy batch).
  """
  found: Dict[str, tf.Variable] = {}
  seen = set()
  for path, variable in tf_internals.variables_with_paths(module):
    if id(variable) in seen:
      continue
    seen.add(id(variable))
    name = '/'.join(str(p).lstrip('_') for p in path)
    if name in found:
      name = '/'.join(str(p) for p in path)
    found[name] = variable
  if not found:
    raise ValueError(
        f'{type(module).__name__} has no variables yet; Sonnet builds them '
        f'on the first call, so call it once on a dummy batch first.')
  return found


def get_variables(module: tf.Module) -> Dict[str, np.ndarray]:
  """Returns `{name: np.ndarray}` copies of `module`'s variables."""
  return {name: v.numpy() for name, v in named_variables(module).items()}


class VariableReader:
  """`get_variables(module)` for a learner that publishes often: the
  variables are named once (naming walks the whole module) and read in one
  `tf.function` call (one op dispatch instead of one per variable).

    read = VariableReader(network)    # after the variables exist
    weights = read()                  # {name: np.ndarray}, as get_variables
  """

  def __init__(self, module: tf.Module):
    named = named_variables(module)
    self._names, variables = list(named), list(named.values())
    self._read = tf.function(lambda: [tf.identity(v) for v in variables],
                             autograph=False)

  def __call__(self) -> Dict[str, np.ndarray]:
    return {name: t.numpy() for name, t in zip(self._names, self._read())}


def assign_variables(module: tf.Module,
                     values: Mapping[str, np.ndarray]) -> None:
  """Assigns `values` (from `get_variables`) to `module`'s variables.

  Checks everything before assigning anything.

  Raises:
    ValueError: naming missing or unexpected names, or mismatched shapes.
  """
  targets = named_variables(module)
  missing = sorted(set(targets) - set(values))
  unexpected = sorted(set(values) - set(targets))
  if missing or unexpected:
    raise ValueError(
        f'assign_variables({type(module).__name__}): names differ; missing '
        f'{missing}, unexpected {unexpected}. Known names: '
        f'{sorted(targets)}.')
  bad: Tuple = tuple(
      (name, tuple(targets[name].shape), np.shape(values[name]))
      for name in targets
      if tuple(targets[name].shape) != tuple(np.shape(values[name])))
  if bad:
    raise ValueError(
        f'assign_variables({type(module).__name__}): shape mismatch '
        f'(name, expected, got): {list(bad)}.')
  for name, variable in targets.items():
    variable.assign(values[name])
