"""Counting: `Counter` (hierarchical, shared through handles), `StepsLimiter`."""

from repertory.components.counting.counter import Counter
from repertory.components.counting.steps_limiter import StepsLimiter
