"""Writes whole episodes as single items (the step layout of `sequence.py`)."""

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # The client may be a `reverb_lite.WriterClient` too.
  import reverb  # pylint: disable=g-import-not-at-top

from repertory.components.adders import base
from repertory.components.adders import sequence


def episode_signature(environment_spec, extras_spec=(), core_state_spec=None):
  """Table signature of `EpisodeAdder` items (time dimension None)."""
  return base.step_signature(environment_spec, extras_spec, core_state_spec,
                             time_prefix=(None,))


class EpisodeAdder(sequence.StepAdder):
  """Writes one item per episode: all L = (number of actions + 1) steps.

  `core_state` (if given to `add`) is stored for the episode's first step.
  """

  signature = staticmethod(episode_signature)

  def __init__(self,
               client: 'reverb.Client',
               table: str,
               max_sequence_length: int,
               actor_id: int = 0,
               priority_fn: Optional[base.PriorityFn] = None,
               max_in_flight_items: int = 4,
               flush_timeout_s: float = 30.0):
    """Creates the adder.

    Args:
      client: a `reverb.Client`.
      table: the table to insert into.
      max_sequence_length: the longest episode (in steps, L) it can write.
      actor_id, priority_fn, max_in_flight_items, flush_timeout_s: see
        `ReverbAdder`.
    """
    if max_sequence_length < 2:
      raise ValueError(
          f'max_sequence_length must be >= 2, got {max_sequence_length}.')
    super().__init__(client, table, max_sequence_length, actor_id,
                     priority_fn, max_in_flight_items, flush_timeout_s)
    self._max_sequence_length = max_sequence_length

  def _on_step_appended(self, step_type) -> None:
    del step_type
    if self._episode_steps > self._max_sequence_length:
      steps = self._episode_steps
      self.reset()
      raise ValueError(
          f'EpisodeAdder: the episode reached {steps} steps, more than '
          f'max_sequence_length={self._max_sequence_length}; the episode was '
          'dropped. Raise max_sequence_length (or use a SequenceAdder).')

  def _end_episode(self) -> None:
    self._create_item(self._item(self._episode_steps))
    self._stream_steps = 0
