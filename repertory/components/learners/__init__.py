"""Reusable learner-side pieces: the learner host every agent runs its
algorithm in, Adam in one kernel per variable, finite-only updates, fault
tolerance (resume, periodic and final checkpoints, rollback), minibatch
epochs in one graph, graphs optimised after their first calls, leak-free
results of a `tf.function` step and linear schedules."""

from repertory.components.learners.adam import Adam
from repertory.components.learners.fault_tolerance import FaultTolerance
from repertory.components.learners.finite import all_finite
from repertory.components.learners.finite import apply_if_finite
from repertory.components.learners.finite import create_optimizer_state
from repertory.components.learners.algorithm import Algorithm
from repertory.components.learners.algorithm import Update
from repertory.components.learners.epochs import MinibatchEpochs
from repertory.components.learners.graph_options import OptimizedLater
from repertory.components.learners.host import LearnerHost
from repertory.components.learners.host_serving import ServingHost
from repertory.components.learners.host_results import HostResults
from repertory.components.learners.schedules import LinearDecay
from repertory.components.learners.schedules import remaining_fraction
