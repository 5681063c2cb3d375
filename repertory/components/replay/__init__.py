"""Replay and queues: table builders, Reverb datasets, priority updates.

Importing this package (or `replay.config`, `replay.checkpoints`) does not
import Reverb or TensorFlow: a program graph is built without them; the
table builders, datasets and priority updates load them when first asked
for.
"""

from repertory.components.replay.checkpoints import make_checkpointer
from repertory.components.replay.checkpoints import node_checkpointing
from repertory.components.replay.staleness import drop_stale
from repertory.components.replay.staleness import policy_lag
from repertory.components.replay.staleness import StaleFilterResult

_LAZY = {
    'make_dataset': 'dataset',
    'StarvationLoggingIterator': 'dataset',
    'table_status': 'dataset',
    'PriorityUpdater': 'priorities',
    'DEFAULT_TOLERANCE_RATE': 'tables',
    'error_buffer_for': 'tables',
    'prioritized_replay_table': 'tables',
    'queue_table': 'tables',
    'rate_limiter': 'tables',
    'uniform_replay_table': 'tables',
}


def __getattr__(name: str):
  if name in _LAZY:
    import importlib  # pylint: disable=g-import-not-at-top
    module = importlib.import_module(f'{__name__}.{_LAZY[name]}')
    return getattr(module, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
