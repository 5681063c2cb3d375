"""Exact evaluation points on the step budget.

`PointHolds` holds a `StepsBudget` at the evaluator's next point, so the
evaluator reads the weights of exactly that step: from the first actor step
(the first point, before the evaluator's first word), while an evaluation
runs (the next point), and for as long as the evaluator renews it. A hold
without word from the evaluator for its lease (an evaluator that died or
never started) is dropped once the actors wait at it.
"""

import time
from typing import Optional

from absl import logging

from repertory.components import counting

# How long an evaluation point holds the budget without word from the
# evaluator before the actors go on.
HOLD_LEASE_SECONDS = 10.0
# How long the first evaluation point is held before the evaluator's first
# word (its node may start after the actors).
FIRST_HOLD_SECONDS = 60.0


class PointHolds:
  """Holds `budget` at evaluation points every `every_steps` (0: none until
  `hold` is called)."""

  def __init__(self, budget: counting.StepsBudget, counted: int,
               every_steps: int = 0):
    self._budget = budget
    self._expires = 0.0  # When the hold lapses without the evaluator.
    self._held_at = 0  # That point.
    first = (counted // every_steps + 1) * every_steps if every_steps else 0
    if first and first < budget.limit:
      self._hold(steps=first, lease_seconds=FIRST_HOLD_SECONDS)

  def _hold(self, steps: int, lease_seconds: float) -> None:
    self._expires, self._held_at = time.monotonic() + lease_seconds, steps
    self._budget.hold_at(steps)

  def hold(self, steps: int) -> None:
    """Holds (or keeps holding) the budget at `steps` for another lease."""
    self._hold(steps, HOLD_LEASE_SECONDS)

  def release(self, next_steps: Optional[int] = None) -> None:
    """Lets the actors go on; with `next_steps`, as far as that point."""
    if next_steps is None:
      self._expires = 0.0
      self._budget.release()
    else:
      self.hold(next_steps)

  def drop_if_stale(self) -> None:
    """Drops a hold past its lease, once the actors wait at it (an
    evaluation that runs long before they reach its point keeps it)."""
    if (self._expires and time.monotonic() > self._expires and
        self._budget.wait_for(self._held_at, 0)):
      logging.warning('The evaluation point at %d actor steps was held '
                      'without word from the evaluator; the actors go on.',
                      self._held_at)
      self.release()
