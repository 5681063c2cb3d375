"""Replay and queues: table builders, Reverb datasets, priority updates.

Importing this package (or `replay.checkpoints`) does not
import Reverb or TensorFlow: a program graph is built without them; the
table builders, datasets and priority updates load them when first asked
for.
"""

from repertory import launch
from repertory.components.replay.checkpoints import make_checkpointer
from repertory.components.replay.checkpoints import node_checkpointing
from repertory.components.replay.staleness import drop_stale
from repertory.components.replay.staleness import policy_lag
from repertory.components.replay.staleness import StaleFilterResult

__getattr__ = launch.lazy_attributes(__name__, {
    name: f'{__name__}.{module}' for name, module in {
        'make_dataset': 'dataset',
        'pad_batch': 'dataset',
        'StarvationLoggingIterator': 'dataset',
        'table_status': 'dataset',
        'PriorityUpdater': 'priorities',
        'DEFAULT_TOLERANCE_RATE': 'tables',
        'error_buffer_for': 'tables',
        'prioritized_replay_table': 'tables',
        'queue_table': 'tables',
        'rate_limiter': 'tables',
        'uniform_replay_table': 'tables',
    }.items()})
