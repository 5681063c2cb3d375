"""When a run has reached its target return (`RunMonitor`'s stopping rule).

    rule = StopRule(475.0, judge_evaluation=True, stop_evaluations=2,
                    stop_episodes=20)
    rule.record_evaluation(480.0, episodes=4)
    rule.reached()   # False: 2 evaluations in a row, but 4 episodes

Judged, with `judge_evaluation`: the latest periodic evaluations, at least
`stop_evaluations` in a row that played at least `stop_episodes` episodes
together, each of them at or above the target (evaluations cut short by
their share of the training steps are judged in longer runs of them);
otherwise the mean return of the last `recent_episodes` training episodes.
"""

import collections
from typing import Iterable, Optional


class StopRule:
  """The stopping rule (see the module); not thread-safe: the monitor
  calls it under its lock."""

  def __init__(self, stop_at_return: Optional[float],
               judge_evaluation: bool = False, stop_evaluations: int = 1,
               stop_episodes: int = 1, recent_episodes: int = 100):
    if stop_evaluations < 1 or stop_episodes < 1:
      raise ValueError(
          f'stop_evaluations and stop_episodes must be >= 1, got '
          f'{stop_evaluations} and {stop_episodes}.')
    self.target = stop_at_return
    self.judge_evaluation = judge_evaluation
    self._stop_evaluations = stop_evaluations
    self._stop_episodes = stop_episodes
    self._returns = collections.deque(maxlen=recent_episodes)
    # (mean return, episodes) of the latest evaluations.
    self._judged = collections.deque(
        maxlen=max(stop_evaluations, stop_episodes))

  def record_returns(self, returns: Iterable[float]) -> None:
    self._returns.extend(float(r) for r in returns)

  def record_evaluation(self, mean_return: float, episodes: int) -> None:
    self._judged.append((float(mean_return), int(episodes)))

  def recent_mean(self) -> float:
    """The mean return of the recent training episodes (nan before any)."""
    if not self._returns:
      return float('nan')
    return sum(self._returns) / len(self._returns)

  def reached(self) -> bool:
    if self.target is None:
      return False
    if not self.judge_evaluation:
      return (len(self._returns) == self._returns.maxlen and
              self.recent_mean() >= self.target)
    evaluations = episodes = 0
    for value, count in reversed(self._judged):
      if not value >= self.target:
        return False
      evaluations, episodes = evaluations + 1, episodes + count
      if (evaluations >= self._stop_evaluations and
          episodes >= self._stop_episodes):
        return True
    return False
