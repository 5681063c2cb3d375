"""The learner side of versioned weights: a thread-safe `VariableSource`."""

import threading
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
import tree

from repertory import core
from repertory import launch


def to_numpy(nest: core.Nest) -> core.Nest:
  """Copies a nest of arrays (numpy, TF variables or tensors) into numpy."""
  return tree.map_structure(lambda x: np.array(x, copy=True), nest)


class VariableStore(core.VariableSource):
  """Serves named variable groups (numpy nests) with the policy version.

  The learner calls `publish` after its updates; actors (possibly in other
  threads or, through a CourierNode, in other processes) call
  `get_variables`. Published values are copied to numpy, so a learner that
  keeps training in place never changes what a reader already received.

  Example::

    store = VariableStore()
    version = store.publish({'policy': network_weights})   # -> 1
    version, [weights] = store.get_variables(['policy'])
  """

  def __init__(self,
               variables: Optional[Mapping[str, core.Nest]] = None,
               version: int = 0):
    """Creates the store.

    Args:
      variables: initial variable groups by name (served with `version`).
      version: the initial policy version (0: nothing trained yet).
    """
    self._lock = threading.Condition()
    self._channel = launch.LazyChannel(self.get_variables_if_newer)
    self._variables: Dict[str, core.Nest] = {}
    self._version = int(version)
    if variables:
      self._variables = {k: to_numpy(v) for k, v in variables.items()}

  @property
  def version(self) -> int:
    """The current policy version."""
    return self._version

  def publish(self, variables: Mapping[str, core.Nest]) -> int:
    """Replaces the given groups, increments the version and returns it.

    Groups not named in `variables` keep their previous values (and are
    served with the new version).
    """
    if not isinstance(variables, Mapping) or not variables:
      raise ValueError(
          'publish() takes a non-empty dict {name: nest of arrays}, got '
          f'{type(variables).__name__}: {variables!r:.200}')
    copied = {name: to_numpy(nest) for name, nest in variables.items()}
    with self._lock:
      self._variables.update(copied)
      self._version += 1
      self._lock.notify_all()
      return self._version

  def reset(self, variables: Mapping[str, core.Nest], version: int) -> int:
    """Serves `variables` as `version` (a resumed or rolled-back learner).

    Unlike `publish`, the version is set, not counted up: a learner resuming
    from a checkpoint continues from that checkpoint's version. Readers
    waiting in `wait_for_version` are woken. Groups not named keep their
    values. Returns the version.

    Raises:
      ValueError: on an empty `variables` or a negative `version`.
    """
    if not isinstance(variables, Mapping) or not variables:
      raise ValueError(
          'reset() takes a non-empty dict {name: nest of arrays}, got '
          f'{type(variables).__name__}: {variables!r:.200}')
    if isinstance(version, bool) or int(version) != version or version < 0:
      raise ValueError(f'reset() takes a version >= 0, got {version!r}.')
    copied = {name: to_numpy(nest) for name, nest in variables.items()}
    with self._lock:
      self._variables.update(copied)
      self._version = int(version)
      self._lock.notify_all()
      return self._version

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    if isinstance(names, str):
      names = [names]
    with self._lock:
      unknown = [n for n in names if n not in self._variables]
      if unknown:
        raise KeyError(
            f'Unknown variable group(s) {unknown}; this store serves '
            f'{sorted(self._variables)} (publish them first).')
      return core.VersionedVariables(
          self._version, [self._variables[n] for n in names])

  def get_variables_if_newer(self, names: Sequence[str], version: int
                             ) -> Optional[core.VersionedVariables]:
    """`get_variables(names)`, or None while the store is still at
    `version` (the caller holds those weights already)."""
    if self._version == version:
      return None
    return self.get_variables(names)

  def variables_channel_address(self) -> str:
    """Starts (once) a direct TCP channel serving `get_variables_if_newer`
    and returns its 'host:port' (`VariableClient(..., transport='tcp')`;
    see `launch.serve_channel`)."""
    return self._channel.address()

  def close(self) -> None:
    """Closes the channel, if one was started."""
    self._channel.close()

  def wait_for_version(self, version: int, timeout_s: float = 60.0) -> int:
    """Blocks until the store's version is >= `version`; returns it.

    Raises:
      TimeoutError: naming the version waited for and the current one.
    """
    with self._lock:
      if not self._lock.wait_for(lambda: self._version >= version,
                                 timeout=timeout_s):
        raise TimeoutError(
            f'VariableStore: waited {timeout_s}s for version {version}, '
            f'still at version {self._version}.')
      return self._version
