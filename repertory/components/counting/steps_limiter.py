"""Step budgets: `StepsBudget` (exact, by reservation; what the run monitor
hosts for the actors) and `StepsLimiter` (a node that stops the program once
a counter passes a budget)."""

import threading
import time
from typing import Any, Dict, Optional, Tuple

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
  """An exact step budget shared by many actors: a ledger of reservations.

  An actor asks for steps before taking them (`acquire`); the budget never
  grants more than `limit - counted - reserved` (nor past a `hold_at` point,
  see below), so the actors together take at most `limit` steps plus, at the
  very end, the rounding of one batched step. Each call also reports the
  steps the caller used since its previous call (they move from its
  reservation to `counted`).

  Faults: a holder that stays silent for `lease_seconds` (a process killed
  with SIGKILL, whose restarted process asks under a new name) loses its
  reservation, which returns to the budget (`returned`): its steps not
  reported were never counted, so the run still ends at its limit. Actors
  that get nothing while others hold steps ask again (`ActorReporter`), so
  the returned steps are spent. A holder that comes back after its lease
  (frozen that long) has the steps it reports counted, and gets a fresh
  reservation (`lease` tells it what it holds).

  Holds: `hold_at(steps)` stops the grants at `steps` until `release()`
  (the evaluator takes the weights of an exact step this way).

  Example::

    budget = StepsBudget(1_000)
    budget.acquire('actor-0', used=0, wanted=64)    # 64
    budget.acquire('actor-0', used=64, wanted=64)   # 64; counted == 64
  """

  def __init__(self, limit: int, counted: int = 0,
               lease_seconds: float = 10.0):
    if limit < 0:
      raise ValueError(f'limit must be >= 0, got {limit}.')
    if lease_seconds <= 0:
      raise ValueError(f'lease_seconds must be > 0, got {lease_seconds}.')
    self._limit = int(limit)
    self._counted = int(counted)
    self._lease_seconds = lease_seconds
    self._reserved: Dict[str, Tuple[int, float]] = {}  # holder: (steps, time)
    self._returned = 0
    self._hold: Optional[int] = None
    self._changed = threading.Condition()

  @property
  def limit(self) -> int:
    return self._limit

  @property
  def counted(self) -> int:
    """Steps reported as used (including the `counted` it started from)."""
    with self._changed:
      return self._counted

  @property
  def returned(self) -> int:
    """Steps reserved by holders that went silent, returned to the budget."""
    with self._changed:
      return self._returned

  def exhausted(self) -> bool:
    """True once the used steps reach the limit."""
    with self._changed:
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
      The steps granted (0 once the budget is spent, or while others hold
      what is left, or at a hold).
    """
    return self._take(holder, used, wanted, first)[0]

  def lease(self, holder: str, used: int, wanted: int,
            first: bool = False) -> Tuple[int, int]:
    """As `acquire`; returns (granted, held): the steps granted now and
    every step `holder` holds after this call (what it had left plus what
    is granted; only what is granted if its lease had expired)."""
    return self._take(holder, used, wanted, first)

  def _take(self, holder: str, used: int, wanted: int,
            first: bool) -> Tuple[int, int]:
    if used < 0 or wanted < 0:
      raise ValueError(f'used and wanted must be >= 0, got {used}, {wanted}.')
    now = time.monotonic()
    with self._changed:
      if first:
        self._reserved.pop(holder, None)
      self._counted += int(used)
      held = max(self._reserved.get(holder, (0, now))[0] - int(used), 0)
      self._expire(now, keep=holder)
      others = sum(s for n, (s, _) in self._reserved.items() if n != holder)
      ceiling = self._limit if self._hold is None else min(self._hold,
                                                          self._limit)
      available = ceiling - self._counted - others - held
      granted = max(min(int(wanted), available), 0)
      self._reserved[holder] = (held + granted, now)
      self._changed.notify_all()
      return granted, held + granted

  def _expire(self, now: float, keep: str = '') -> None:
    for name, (steps, since) in list(self._reserved.items()):
      if name != keep and now - since > self._lease_seconds:
        if steps:
          logging.warning('StepsBudget: %s was silent for %.0f s; its %d '
                          'reserved steps return to the budget.', name,
                          now - since, steps)
        self._returned += steps
        del self._reserved[name]

  def hold_at(self, steps: int) -> None:
    """Grants no step beyond `steps` (counted) until `release()` or the
    next `hold_at`, which moves the hold."""
    with self._changed:
      self._hold = int(steps)
      self._changed.notify_all()

  def release(self) -> None:
    with self._changed:
      self._hold = None
      self._changed.notify_all()

  def wait_for(self, steps: int, timeout: float) -> bool:
    """Blocks up to `timeout` s until `steps` are counted (or the budget is
    spent); returns whether they are. Expires silent holders meanwhile."""
    deadline = time.monotonic() + timeout
    with self._changed:
      while self._counted < min(steps, self._limit):
        self._expire(time.monotonic())
        left = deadline - time.monotonic()
        if left <= 0:
          return False
        self._changed.wait(min(left, 0.5))
      return True

  def wait_for_release(self, timeout: float) -> bool:
    """While a hold is set, blocks up to `timeout` s for its release or
    move; returns whether it was (False at once without a hold)."""
    deadline = time.monotonic() + timeout
    with self._changed:
      hold = self._hold
      if hold is None:
        return False
      while self._hold == hold:
        left = deadline - time.monotonic()
        if left <= 0:
          return False
        self._changed.wait(left)
      return True

  def outstanding(self) -> int:
    """Steps reserved and not reported as used yet."""
    with self._changed:
      return sum(s for s, _ in self._reserved.values())

  def wait_settled(self, timeout: float) -> bool:
    """Blocks up to `timeout` s until no step is reserved (every holder
    reported; silent ones expire after their lease); returns whether."""
    deadline = time.monotonic() + timeout
    with self._changed:
      while sum(s for s, _ in self._reserved.values()):
        self._expire(time.monotonic())
        left = deadline - time.monotonic()
        if left <= 0:
          return False
        self._changed.wait(min(left, 0.25))
      return True
