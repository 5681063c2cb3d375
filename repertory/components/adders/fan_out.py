"""Batched steps fanned out to one adder per environment.

A batched actor (`actors.BatchedActor`) steps N environments at once and
hands its adder batched data: a `TimeStep` whose fields have a leading
environment axis, actions `[N, ...]`, extras and recurrent states as nests
of `[N, ...]` arrays. `UnrollAdder` takes that directly; the adders that
follow one episode at a time (`NStepTransitionAdder`, `SequenceAdder`,
`EpisodeAdder`) do not. `PerEnvironmentAdder` gives them the batched API:
environment j's slice goes to adder j, and a FIRST step of environment j
(the batch reset it after its LAST step) starts adder j's next episode.
"""

from typing import Any, Iterator, Optional, Sequence

import dm_env
import numpy as np
import tree

from repertory import core

_FIRST = int(dm_env.StepType.FIRST)


def environment_slice(nest: core.Nest, j: int) -> core.Nest:
  """Environment j's part of a nest of `[N, ...]` arrays."""
  return tree.map_structure(lambda x: np.asarray(x)[j], nest)


def timestep_slice(timestep: dm_env.TimeStep, j: int) -> dm_env.TimeStep:
  """Environment j's `TimeStep` of a batched one (reward and discount may be
  None on FIRST steps)."""
  pick = lambda x: None if x is None else environment_slice(x, j)
  return dm_env.TimeStep(
      step_type=dm_env.StepType(int(np.asarray(timestep.step_type)[j])),
      reward=pick(timestep.reward), discount=pick(timestep.discount),
      observation=environment_slice(timestep.observation, j))


class PerEnvironmentAdder:
  """The batched adder API over one adder per environment.

  Example (n-step transitions from a `BatchedActor` of 8 environments):

    adder = adders.PerEnvironmentAdder([
        adders.NStepTransitionAdder(client, 'replay', n_step=5, discount=0.99)
        for _ in range(8)])
    actor = actors.BatchedActor(environment, policy, adder, ...)

  Args:
    adders: one adder per environment, in the batch's order; each has
      `add_first`, `add`, `set_policy_version`, `flush` and `close`.
  """

  def __init__(self, adders: Sequence[Any]):
    if not adders:
      raise ValueError('PerEnvironmentAdder needs one adder per environment, '
                       'got none.')
    self._adders = list(adders)

  def __len__(self) -> int:
    return len(self._adders)

  def __iter__(self) -> Iterator[Any]:
    return iter(self._adders)

  def __getitem__(self, j: int) -> Any:
    return self._adders[j]

  def _check(self, step_type: Any) -> np.ndarray:
    step_type = np.asarray(step_type)
    if step_type.shape != (len(self._adders),):
      raise ValueError(
          f'PerEnvironmentAdder: a batch of {len(self._adders)} environments '
          f'expects step_type of shape ({len(self._adders)},), got '
          f'{step_type.shape}.')
    return step_type

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    """Starts every environment's episode from a batched timestep."""
    self._check(timestep.step_type)
    for j, adder in enumerate(self._adders):
      adder.add_first(timestep_slice(timestep, j))

  def add(self, action: core.Nest, next_timestep: dm_env.TimeStep,
          extras: core.Nest = (), core_state: Optional[core.Nest] = None
          ) -> None:
    """Environment j's action, extras and state with the timestep that
    followed go to adder j; a FIRST timestep starts adder j's next episode
    (the batch ignored the action taken on the LAST one)."""
    step_type = self._check(next_timestep.step_type)
    for j, adder in enumerate(self._adders):
      timestep = timestep_slice(next_timestep, j)
      if step_type[j] == _FIRST:
        adder.add_first(timestep)
        continue
      kwargs = {'extras': environment_slice(extras, j)}
      if core_state is not None:
        kwargs['core_state'] = environment_slice(core_state, j)
      adder.add(environment_slice(action, j), timestep, **kwargs)

  def set_policy_version(self, version: int) -> None:
    for adder in self._adders:
      adder.set_policy_version(version)

  def flush(self) -> None:
    for adder in self._adders:
      adder.flush()

  def close(self) -> None:
    for adder in self._adders:
      adder.close()
