"""Evaluation and run monitoring: greedy/sampled evaluation episodes, live
progress, and the run's `results.json`."""

from repertory.components.evaluation.evaluator import evaluate
from repertory.components.evaluation.evaluator import EvaluationResult
from repertory.components.evaluation.monitor import RunMonitor
