"""Replay and queues: table builders, Reverb datasets, priority updates."""

from repertory.components.replay.checkpoints import make_checkpointer
from repertory.components.replay.checkpoints import node_checkpointing
from repertory.components.replay.dataset import make_dataset
from repertory.components.replay.dataset import StarvationLoggingIterator
from repertory.components.replay.dataset import table_status
from repertory.components.replay.priorities import PriorityUpdater
from repertory.components.replay.staleness import drop_stale
from repertory.components.replay.staleness import policy_lag
from repertory.components.replay.staleness import StaleFilterResult
from repertory.components.replay.tables import DEFAULT_TOLERANCE_RATE
from repertory.components.replay.tables import error_buffer_for
from repertory.components.replay.tables import prioritized_replay_table
from repertory.components.replay.tables import queue_table
from repertory.components.replay.tables import rate_limiter
from repertory.components.replay.tables import uniform_replay_table
