"""Step budgets: `StepsBudget` (exact, by reservation; what the run monitor
hosts for the actors) and `StepsLimiter` (a node that stops the program once
a counter passes a budget)."""

import threading
import time
from typing import Any, Dict, Tuple

from absl import logging

from repertory import core
from repertory import launch


class StepsLimiter(core.Worker):
  """A worker node that calls `launch.stop()` once `max_steps` are counted.

  Example::

    counter = program.add_node(launch.CourierNode(Counter))
    program.add_node(launch.CourierNode(StepsLimiter, counter, 1_000_000))
  """

  def __init__(self,
               counter: Any,
               max_steps: int,
               steps_key: str = 'actor_steps',
               poll_interval_s: float = 1.0):
    if max_steps < 0:
      raise ValueError(f'max_steps must be >= 0, got {max_steps}.')
    self._counter = counter
    self._max_steps = max_steps
    self._steps_key = steps_key
    self._poll_interval_s = poll_interval_s

  def run(self) -> None:
    stop_event = launch.stop_event()
    last_log = time.monotonic()
    while not stop_event.is_set():
      counts = self._counter.get_counts()
      steps = counts.get(self._steps_key, 0)
      if steps >= self._max_steps:
        logging.info('StepsLimiter: %s = %d reached max_steps = %d; stopping.',
                     self._steps_key, steps, self._max_steps)
        launch.stop()
        return
      if time.monotonic() - last_log > 60:
        logging.info('StepsLimiter: %s = %d of %d (known keys: %s).',
                     self._steps_key, steps, self._max_steps, sorted(counts))
        last_log = time.monotonic()
      stop_event.wait(self._poll_interval_s)


class StepsBudget:
  """An exact step budget shared by many actors, by reservation.

  An actor asks for steps before taking them (`acquire`); the budget never
  grants more than `limit - counted - reserved`, so the actors together take
  at most `limit` steps plus, at the very end, the rounding of each actor's
  last batched step. Each call also reports the steps the caller used since
  its previous call (they move from its reservation to `counted`).

  A holder that stays silent for `lease_seconds` (a crashed actor) loses its
  reservation, so a crash cannot keep the budget from being spent.

  Example::

    budget = StepsBudget(1_000)
    budget.acquire('actor-0', used=0, wanted=64)    # 64
    budget.acquire('actor-0', used=64, wanted=64)   # 64; counted == 64
  """

  def __init__(self, limit: int, counted: int = 0,
               lease_seconds: float = 30.0):
    if limit < 0:
      raise ValueError(f'limit must be >= 0, got {limit}.')
    if lease_seconds <= 0:
      raise ValueError(f'lease_seconds must be > 0, got {lease_seconds}.')
    self._limit = int(limit)
    self._counted = int(counted)
    self._lease_seconds = lease_seconds
    self._reserved: Dict[str, Tuple[int, float]] = {}  # holder: (steps, time)
    self._lock = threading.Lock()

  @property
  def limit(self) -> int:
    return self._limit

  @property
  def counted(self) -> int:
    """Steps reported as used (including the `counted` it started from)."""
    with self._lock:
      return self._counted

  def exhausted(self) -> bool:
    """True once the used steps reach the limit."""
    with self._lock:
      return self._counted >= self._limit

  def acquire(self, holder: str, used: int, wanted: int,
              first: bool = False) -> int:
    """Reports `used` steps of `holder` and grants it up to `wanted` more.

    Args:
      holder: a name unique to the calling actor (process).
      used: steps taken since this holder's previous call.
      wanted: steps it would like to take next (0 only reports).
      first: the holder's first call: a reservation left under its name (by
        an earlier process) is dropped.

    Returns:
      The steps granted (0 once the budget is spent).
    """
    if used < 0 or wanted < 0:
      raise ValueError(f'used and wanted must be >= 0, got {used}, {wanted}.')
    now = time.monotonic()
    with self._lock:
      if first:
        self._reserved.pop(holder, None)
      self._counted += int(used)
      held = max(self._reserved.get(holder, (0, now))[0] - int(used), 0)
      for name, (steps, since) in list(self._reserved.items()):
        if name != holder and now - since > self._lease_seconds:
          logging.warning('StepsBudget: %s was silent for %.0f s; its %d '
                          'reserved steps return to the budget.', name,
                          now - since, steps)
          del self._reserved[name]
      others = sum(s for n, (s, _) in self._reserved.items() if n != holder)
      available = self._limit - self._counted - others - held
      granted = max(min(int(wanted), available), 0)
      self._reserved[holder] = (held + granted, now)
      return granted
