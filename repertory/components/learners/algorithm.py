"""What an agent's learner algorithm gives its `LearnerHost` (see host.py):
a step that returns an `Update`, its state for checkpoints and the
variables its policy reads."""

from typing import Any, Mapping, NamedTuple, Optional

from repertory import core


class Update(NamedTuple):
  """What one algorithm step returns to its host.

  Attributes:
    metrics: logged as they are (namespaced keys: 'losses/...', 'charts/...').
    counts: added to the run's counter ('learner_steps', 'policy_lag_sum',
      'policy_lag_items', 'dropped_stale' are read by the monitor).
    applied: True if new weights came out of the step (they are published);
      False if an update was attempted and was not finite (the host counts it
      and rolls back after `max_bad_updates` in a row); None if no update was
      attempted (e.g. every item was too stale).
    variables: the groups to publish when `applied`, if the step already has
      them as numpy (None: the host calls `policy_variables()`).
    publish: False keeps an applied update's weights unpublished for now
      (R2D2 publishes every `learner_steps_per_publish` steps).
  """
  metrics: Mapping[str, Any]
  counts: Mapping[str, float] = {}
  applied: Optional[bool] = True
  variables: Optional[Mapping[str, core.Nest]] = None
  publish: bool = True


class Algorithm(core.Saveable):
  """The part of a learner that is the agent's own."""

  def fetch(self, version: int) -> Optional[tuple]:  # pylint: disable=unused-argument
    """Waits for the next step's data (e.g. a batch) outside the host's
    lock, so a stop is never held up by it; returns the arguments for
    `step` after the version, or None if none came (within ~1 s). The
    default, (), lets `step` read its data itself."""
    return ()

  def step(self, version: int, *data: Any) -> Optional[Update]:
    """One update at policy `version` (on `data` when actors push it);
    None if no data came (within ~1 s)."""
    raise NotImplementedError

  def policy_variables(self) -> Mapping[str, core.Nest]:
    """The variable groups actors read, as numpy: {'policy': weights}."""
    raise NotImplementedError

  def save(self) -> Mapping[str, Any]:
    """The trackables to checkpoint by name (networks, optimizers)."""
    raise NotImplementedError

  def restore(self, state: Any) -> None:
    """Checkpoints restore into `save()`'s trackables in place."""

  def export_snapshot(self, path: str) -> str:  # pylint: disable=unused-argument
    """Exports the greedy policy as a SavedModel; returns its path."""
    raise NotImplementedError(f'{type(self).__name__} exports no snapshot.')

  def flush(self) -> None:
    """Waits until the algorithm's asynchronous writes (e.g. priorities)
    reached their destination."""

  def close(self) -> None:
    """Called once when the host's `run()` ends."""
