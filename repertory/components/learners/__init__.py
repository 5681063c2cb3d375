"""Reusable learner-side pieces: finite-only updates and fault tolerance
(resume, periodic and final checkpoints, rollback)."""

from repertory.components.learners.fault_tolerance import FaultTolerance
from repertory.components.learners.finite import all_finite
from repertory.components.learners.finite import apply_if_finite
from repertory.components.learners.finite import create_optimizer_state
