"""The model store: learner checkpoints with tags and rollback, and policy
snapshots (SavedModels) that act without the training code."""

from repertory.components.model_store.snapshot import export_policy
from repertory.components.model_store.snapshot import load_policy
from repertory.components.model_store.snapshot import SnapshotActor
from repertory.components.model_store.store import checkpoint_problem
from repertory.components.model_store.store import CheckpointError
from repertory.components.model_store.store import ModelStore
from repertory.components.model_store.store import Restored
