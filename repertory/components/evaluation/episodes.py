"""Episode bookkeeping for batched actors (no TensorFlow: env-only actors
use it too)."""

import time
from typing import Any, List, Tuple

import numpy as np

# How often batched actors send their counts (`ActorReporter`): the
# counters and the monitor lag by at most this much.
REPORT_INTERVAL_S = 0.25

_FIRST = 0  # dm_env.StepType.FIRST
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

  def observe(self, step_type: np.ndarray, reward: np.ndarray) -> None:
    step_type = np.asarray(step_type)
    first = step_type == _FIRST
    self._returns[first] = 0.0
    self._lengths[first] = 0
    rest = ~first
    self._returns[rest] += np.asarray(reward, np.float64)[rest]
    self._lengths[rest] += 1
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
  monitor, through futures (never blocking the actor).

  With `min_interval_s` > 0, `report` only accumulates until that long has
  passed since the last send (a Ray call costs about as much as writing an
  unroll); `flush()` sends what is pending (call it when the actor stops).
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

  def report(self, steps: int, returns: List[float],
             lengths: List[int]) -> None:
    self._steps += steps
    self._returns.extend(returns)
    self._lengths.extend(lengths)
    if time.monotonic() - self._last_send >= self._min_interval_s:
      self.flush()

  def flush(self) -> None:
    """Sends the pending steps and episodes now."""
    self._last_send = time.monotonic()
    if self._counter is not None and self._steps:
      self._counter.futures.increment(actor_steps=self._steps)
    if self._monitor is not None and self._returns:
      self._monitor.futures.record_episodes(returns=self._returns,
                                            lengths=self._lengths)
    self._steps = 0
    self._returns, self._lengths = [], []
