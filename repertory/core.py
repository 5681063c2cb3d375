"""The few interfaces every part of repertory speaks.

An actor acts in an environment and writes what it saw through an adder; a
learner consumes that experience and serves its weights as a variable source;
anything with a `run()` loop is a worker. The typical acting loop::

  timestep = environment.reset()
  actor.observe_first(timestep)
  while not timestep.last():
    action = actor.select_action(timestep.observation)
    timestep = environment.step(action)
    actor.observe(action, next_timestep=timestep)
    actor.update()

and the typical learner loop::

  while True:
    learner.step()          # one gradient update on one batch

Weights are versioned: the policy version is an integer that the learner
increments each time it publishes new weights. Every fetch returns the version
together with the weights, so that actors can tag the experience they write
with the version of the behaviour policy, and learners can measure policy lag.
"""

import abc
from typing import (Any, Dict, Generic, List, NamedTuple, Optional, Protocol,
                    Sequence, Tuple, TypeVar)

import dm_env

# A nested structure (dicts, lists, tuples, namedtuples) of numpy arrays.
Nest = Any
T = TypeVar('T')


class VersionedVariables(NamedTuple):
  """What a `VariableSource` returns: the weights and the policy version.

  Attributes:
    version: the learner's policy version these weights belong to; 0 before
      the first update, incremented by one each time new weights are
      published.
    variables: one nested structure of numpy arrays per requested name, in the
      order of the names asked for.
  """
  version: int
  variables: List[Nest]


class Policy(Protocol):
  """A batched acting step with recurrent state, as actor nodes
  (`components.actors.BatchedActor`) and the inference server call it
  (`actor_critic.networks.Policy` is one):

    state = policy.initial_state(num_envs)
    action, extras, state = policy.step(observation, state, first)

  `observation` is `[N, ...]` (one row per environment), `first` `[N]` bool
  (rows whose episode starts now: their state is zeroed first); `state` is
  `()` for a feedforward policy. `extras` (e.g. {'logits': [N, A]}) go to the
  adder with the actions. `set_weights` takes a learner's variables.
  Optional, for `BatchedActor`: `observe_timestep(timestep)` before each
  step (a policy that also needs rewards and step types, SEED's
  `ServerPolicy`), `update(wait)` and `version` (a policy that refreshes its
  own weights), `close()`. See docs/protocols.md.
  """

  def initial_state(self, batch_size: int) -> Nest:
    ...

  def step(self, observation: Nest, state: Nest, first: Any
           ) -> Tuple[Any, Dict[str, Any], Nest]:
    ...

  def set_weights(self, weights: Nest) -> None:
    ...


class Actor(abc.ABC):
  """Acts in an environment and (optionally) records what it saw."""

  @abc.abstractmethod
  def select_action(self, observation: Nest) -> Nest:
    """Returns the action to take given the current observation."""

  @abc.abstractmethod
  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    """Records the first timestep of an episode."""

  @abc.abstractmethod
  def observe(self, action: Nest, next_timestep: dm_env.TimeStep) -> None:
    """Records the action taken and the timestep it led to."""

  @abc.abstractmethod
  def update(self, wait: bool = False) -> None:
    """Refreshes the policy's weights from the variable source.

    Args:
      wait: if True, block until the newest weights have been fetched;
        otherwise start or reuse a background fetch and return at once.
    """


class VariableSource(abc.ABC):
  """Serves named groups of variables with the policy version they belong to.

  Implementations must be safe to call from another thread while the owner
  (typically a learner) keeps training.
  """

  @abc.abstractmethod
  def get_variables(self, names: Sequence[str]) -> VersionedVariables:
    """Returns the current version and the variables for each of `names`.

    Args:
      names: names of variable groups (e.g. 'policy', 'value'). An unknown
        name raises a `KeyError` naming the known ones.
    """


class Worker(abc.ABC):
  """Something with a main loop, run in its own thread or process."""

  @abc.abstractmethod
  def run(self) -> None:
    """Runs until the program stops (or forever)."""


class Saveable(abc.ABC, Generic[T]):
  """Something whose state can be saved and restored (checkpoints)."""

  @abc.abstractmethod
  def save(self) -> T:
    """Returns the state to checkpoint."""

  @abc.abstractmethod
  def restore(self, state: T) -> None:
    """Restores a state returned by `save`."""


class Learner(VariableSource, Worker, Saveable):
  """Consumes experience and updates weights, serving them as it goes."""

  @abc.abstractmethod
  def step(self) -> None:
    """Performs one update step (typically one batch, one gradient)."""

  def run(self, num_steps: Optional[int] = None) -> None:
    """Calls `step` `num_steps` times, or forever if `num_steps` is None."""
    iterator = range(num_steps) if num_steps is not None else iter(int, 1)
    for _ in iterator:
      self.step()

  def save(self):
    raise NotImplementedError(
        f'{type(self).__name__} does not implement save().')

  def restore(self, state) -> None:
    raise NotImplementedError(
        f'{type(self).__name__} does not implement restore().')
