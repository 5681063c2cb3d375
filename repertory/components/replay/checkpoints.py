"""Reverb checkpoints of a run's tables (resume restores them)."""

import functools
from typing import Any, Dict, Optional


def make_checkpointer(directory: str) -> Any:
  """A Reverb checkpointer writing into (and restoring from) `directory`."""
  import reverb  # pylint: disable=g-import-not-at-top  # imports TF: lazily.
  return reverb.checkpointers.DefaultCheckpointer(directory)


def node_checkpointing(directory: str,
                       every_minutes: Optional[float]) -> Dict[str, Any]:
  """`launch.ReverbNode` keyword arguments that checkpoint its tables into
  `directory` every `every_minutes` and when the program stops, and
  restore the latest checkpoint when the node starts; {} for None."""
  if every_minutes is None:
    return {}
  return dict(checkpoint_ctor=functools.partial(make_checkpointer, directory),
              checkpoint_time_delta_minutes=every_minutes)
