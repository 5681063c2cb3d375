"""Evaluation and run monitoring: evaluation episodes, episode bookkeeping of
batched actors, live progress and the run's `results.json`.

Importing this package does not import TensorFlow.
"""

from repertory.components.evaluation.episodes import ActorReporter
from repertory.components.evaluation.episodes import EpisodeTracker
from repertory.components.evaluation.evaluator import evaluate
from repertory.components.evaluation.evaluator import EvaluationResult
from repertory.components.evaluation.evaluator import PeriodicEvaluator
from repertory.components.evaluation.monitor import RunMonitor
