"""Counting: `Counter` (hierarchical, shared through handles), the exact
`StepsBudget` and the `StepsLimiter` node."""

from repertory.components.counting.counter import Counter
from repertory.components.counting.steps_limiter import StepsBudget
from repertory.components.counting.steps_limiter import StepsLimiter
