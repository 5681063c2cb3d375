"""Episode bookkeeping for batched actors (no TensorFlow: env-only actors
use it too)."""

from typing import Any, List, Tuple

import numpy as np

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
  monitor, through futures (never blocking the actor); call it once per
  unroll or so, not per step."""

  def __init__(self, counter: Any = None, monitor: Any = None):
    self._counter = counter
    self._monitor = monitor

  def report(self, steps: int, returns: List[float],
             lengths: List[int]) -> None:
    if self._counter is not None and steps:
      self._counter.futures.increment(actor_steps=steps)
    if self._monitor is not None and returns:
      self._monitor.futures.record_episodes(returns=returns, lengths=lengths)
