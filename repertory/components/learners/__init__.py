"""Reusable learner-side pieces: finite-only updates, fault tolerance
(resume, periodic and final checkpoints, rollback) and leak-free results
of a `tf.function` step."""

from repertory.components.learners.fault_tolerance import FaultTolerance
from repertory.components.learners.finite import all_finite
from repertory.components.learners.finite import apply_if_finite
from repertory.components.learners.finite import create_optimizer_state
from repertory.components.learners.host_results import HostResults
