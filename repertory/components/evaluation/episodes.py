"""Episode bookkeeping for batched actors (no TensorFlow: env-only actors
use it too)."""

import os
import socket
import time
from typing import Any, List, Sequence, Tuple
import uuid

import numpy as np

from repertory import launch

# How often batched actors send their counts (`ActorReporter`): the
# counters and the monitor lag by at most this much.
REPORT_INTERVAL_S = 0.25
# About how many seconds of steps an actor reserves per call to the budget.
BUDGET_CHUNK_S = 0.25
# How often an actor that got no steps while some are still out asks again.
RETRY_S = 0.5

_FIRST = 0  # dm_env.StepType.FIRST
_MID = 1    # dm_env.StepType.MID
_LAST = 2   # dm_env.StepType.LAST


class EpisodeTracker:
  """Sums rewards per environment of a batch; collects finished episodes.

  Feed it every batched timestep (`observe(step_type [N], reward [N])`); the
  reward of a FIRST step is ignored. `pop()` returns the returns and lengths
  of the episodes finished since the previous call.
  """

  def __init__(self, num_envs: int):
    if num_envs < 1:
      raise ValueError(f'num_envs must be >= 1, got {num_envs}.')
    self._returns = np.zeros(num_envs, np.float64)
    self._lengths = np.zeros(num_envs, np.int64)
    self._finished_returns: List[float] = []
    self._finished_lengths: List[int] = []
    self._all_mid = None  # The bytes of a step_type [N] that is all MID.

  def observe(self, step_type: np.ndarray, reward: np.ndarray) -> None:
    step_type = np.asarray(step_type)
    # Every row adds its reward and a step; rows that start an episode are
    # then zeroed (their reward is ignored).
    self._returns += reward
    self._lengths += 1
    # Most batched steps are MID everywhere: comparing the raw bytes is
    # much cheaper than numpy's comparisons and `any` on a few elements.
    if self._all_mid is None:
      self._all_mid = np.full_like(step_type, _MID).tobytes()
    if step_type.tobytes() == self._all_mid:
      return
    first = step_type == _FIRST
    self._returns[first] = 0.0
    self._lengths[first] = 0
    last = step_type == _LAST
    if last.any():
      self._finished_returns.extend(self._returns[last].tolist())
      self._finished_lengths.extend(self._lengths[last].tolist())

  def pop(self) -> Tuple[List[float], List[int]]:
    """(returns, lengths) of the episodes finished since the last call."""
    out = (self._finished_returns, self._finished_lengths)
    self._finished_returns, self._finished_lengths = [], []
    return out


class ActorReporter:
  """Sends actor steps to the counter and finished episodes to the run
  monitor, through futures (never blocking the actor); keeps the actor
  within the run's step budget.

  With `min_interval_s` > 0, `report` only accumulates until that long has
  passed since the last send (a Ray call costs about as much as writing an
  unroll); `flush()` sends what is pending (call it when the actor stops).

  Exact budgets: an actor loop that calls `acquire(n)` before each batched
  step of `n` environment steps takes its steps from the monitor's
  `StepsBudget` (`RunMonitor.acquire_steps`, one blocking call per chunk of
  about `BUDGET_CHUNK_S` of steps) and its steps are counted there, not by
  `report`. `acquire` returns False once the budget is spent (after the
  program stops, inside a launched program), so::

    while not stop.is_set() and reporter.acquire(num_envs):
      ...  # one batched step
  """

  def __init__(self, counter: Any = None, monitor: Any = None,
               min_interval_s: float = 0.0):
    if min_interval_s < 0:
      raise ValueError(f'min_interval_s must be >= 0, got {min_interval_s}.')
    self._counter = counter
    self._monitor = monitor
    self._min_interval_s = min_interval_s
    self._last_send = -float('inf')
    self._steps = 0
    self._returns: List[float] = []
    self._lengths: List[int] = []
    # Budget state (used once `acquire` is called with a monitor).
    self._holder = f'{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}'
    self._budgeted = False
    self._allowance = 0   # Steps granted and not taken yet.
    self._used = 0        # Steps taken since the last call to the monitor.
    self._chunk = 0       # Steps asked for per call (adapts to the rate).
    self._last_acquire = time.monotonic()

  def acquire(self, num_steps: int) -> bool:
    """True if the actor may take `num_steps` more steps (one batched step).

    Blocks for one call to the monitor when the local allowance is spent.
    When nothing is granted while steps are still out (other actors hold
    them, or an evaluation holds the budget at its step) it asks again every
    `RETRY_S` inside a launched program, until the program stops (the
    monitor stops it once the budget is spent): then it returns False.
    Outside a launched program it returns False at the first refusal.
    Without a monitor it always returns True.
    """
    if self._monitor is None:
      return True
    if self._allowance < num_steps:
      self._ask(num_steps)
      if self._allowance <= 0 and launch.get_launch_type() is not None:
        stop = launch.stop_event()
        while self._allowance <= 0 and not stop.wait(RETRY_S):
          self._ask(num_steps)
      if self._allowance <= 0:
        self.flush()
        return False
    self._used += num_steps  # The last grant may be short of a whole step.
    self._allowance = max(self._allowance - num_steps, 0)
    return True

  def _ask(self, num_steps: int) -> None:
    """One call to the monitor: reports the steps used and the episodes
    finished since the last, asks for about `BUDGET_CHUNK_S` of steps (whole
    batched steps); the allowance becomes what the monitor says it holds."""
    first = not self._budgeted
    self._budgeted = True
    now = time.monotonic()
    if self._used and now > self._last_acquire:  # Ask for ~BUDGET_CHUNK_S.
      rate = self._used / (now - self._last_acquire)
      self._chunk = int(rate * BUDGET_CHUNK_S)
    wanted = max(self._chunk, num_steps * 4) - self._allowance
    wanted = max(-(-wanted // num_steps) * num_steps, 0)
    returns, lengths = self._take_episodes()
    granted, held = self._monitor.lease_steps(
        self._holder, self._used, wanted, first, returns, lengths)
    # `held` is short of ours if the lease expired (the steps went back to
    # the budget); ours is short of `held` while a flush is on its way.
    self._allowance = min(self._allowance + int(granted), int(held))
    self._last_acquire = now
    self._used = 0

  def _take_episodes(self) -> Tuple[List[float], List[int]]:
    out = (self._returns, self._lengths)
    self._returns, self._lengths = [], []
    return out

  def add_episodes(self, returns: Sequence[float],
                   lengths: Sequence[int]) -> None:
    """Holds finished episodes for the next report or call to the budget.
    Under a budget, hand them over right after the step that finished them
    (before the next `acquire`): the monitor then counts them with that
    step, and none arrives after the run's results are written."""
    self._returns.extend(returns)
    self._lengths.extend(lengths)

  def report(self, steps: int, returns: List[float],
             lengths: List[int]) -> None:
    self._steps += steps
    self._returns.extend(returns)
    self._lengths.extend(lengths)
    if time.monotonic() - self._last_send >= self._min_interval_s:
      self.flush()

  def flush(self) -> None:
    """Sends the pending steps and episodes now (under a budget, with the
    steps used since the last call to the monitor, in one call: the monitor
    counts a step's episodes with it)."""
    self._last_send = time.monotonic()
    if self._budgeted:
      if self._used or self._returns:
        returns, lengths = self._take_episodes()
        self._monitor.futures.acquire_steps(self._holder, self._used, 0,
                                            False, returns, lengths)
        self._used = 0
    elif self._counter is not None and self._steps:
      self._counter.futures.increment(actor_steps=self._steps)
    if self._monitor is not None and self._returns:
      self._monitor.futures.record_episodes(returns=self._returns,
                                            lengths=self._lengths)
    self._steps = 0
    self._returns, self._lengths = [], []
