"""The payoff table and Elo ratings of a league.

    table = PayoffTable()
    table.record('main', 'main@v120', score=1.0)   # main beat the snapshot
    table.win_rate('main', 'main@v120')            # (wins + draws / 2) / games
    ratings = Elo(k=16)
    ratings.update('main', 'main@v120', score=1.0)

A score is the first player's result: 1 win, 0.5 draw, 0 loss (from a
zero-sum game's returns: `score_from_returns`), or the payoff scaled to
[0, 1].

`performance_rating` is the other kind of rating: of one player from its
scores against players whose ratings are held fixed (how exact payoffs rate
each new snapshot against rated ones, `exploitability.Exploitability`).
"""

import collections
from typing import Dict, Iterable, Mapping, Sequence, Tuple

import numpy as np

Pair = Tuple[str, str]


def score_from_returns(return_a: float, return_b: float) -> float:
  """1 if a's return is higher, 0 if lower, 0.5 on a tie."""
  if return_a > return_b:
    return 1.0
  if return_a < return_b:
    return 0.0
  return 0.5


class PayoffTable:
  """Games, wins and draws between every ordered pair of players.

  `record(a, b, score)` updates both (a, b) and (b, a), so `win_rate(a, b)
  + win_rate(b, a) == 1` once they met.
  """

  def __init__(self):
    self._games: Dict[Pair, float] = collections.defaultdict(float)
    self._points: Dict[Pair, float] = collections.defaultdict(float)

  def record(self, a: str, b: str, score: float) -> None:
    if not 0.0 <= score <= 1.0:
      raise ValueError(f'A score is in [0, 1] (1 win, 0.5 draw, 0 loss), got '
                       f'{score!r}.')
    self._games[a, b] += 1
    self._games[b, a] += 1
    self._points[a, b] += score
    self._points[b, a] += 1.0 - score

  def games(self, a: str, b: str) -> int:
    return int(self._games.get((a, b), 0))

  def win_rate(self, a: str, b: str, prior: float = 0.5) -> float:
    """a's mean score against b (`prior` before they met)."""
    games = self._games.get((a, b), 0)
    return self._points[a, b] / games if games else prior

  def win_rates(self, a: str, opponents: Iterable[str],
                prior: float = 0.5) -> np.ndarray:
    return np.array([self.win_rate(a, b, prior) for b in opponents])

  def totals(self, a: str, opponents: Iterable[str]) -> Tuple[int, float]:
    """(games, points) of a against all of `opponents` together."""
    games = points = 0.0
    for b in opponents:
      games += self._games.get((a, b), 0)
      points += self._points.get((a, b), 0.0)
    return int(games), points

  def state(self) -> list:
    """JSON-able rows [a, b, games, points] (for persistence)."""
    return [[a, b, self._games[a, b], self._points[a, b]]
            for (a, b) in sorted(self._games)]

  @classmethod
  def from_state(cls, rows: Iterable) -> 'PayoffTable':
    table = cls()
    for a, b, games, points in rows:
      table._games[a, b] = float(games)  # pylint: disable=protected-access
      table._points[a, b] = float(points)  # pylint: disable=protected-access
    return table


def elo_expected(rating_a: float, rating_b: float) -> float:
  """a's expected score against b: 1 / (1 + 10^((R_b - R_a) / 400))."""
  return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


class Elo:
  """Elo ratings, updated after every game: R_a += k (S_a - E_a), and
  R_b -= the same (zero-sum), with new players starting at `initial`."""

  def __init__(self, k: float = 16.0, initial: float = 1000.0,
               ratings: Mapping[str, float] = ()):
    if k <= 0:
      raise ValueError(f'Elo k must be > 0, got {k}.')
    self.k, self.initial = float(k), float(initial)
    self._ratings: Dict[str, float] = dict(ratings)

  def __getitem__(self, player: str) -> float:
    return self._ratings.get(player, self.initial)

  def set(self, player: str, rating: float) -> None:
    self._ratings[player] = float(rating)

  def update(self, a: str, b: str, score: float) -> float:
    """Applies one game's result; returns a's rating change."""
    delta = self.k * (score - elo_expected(self[a], self[b]))
    self._ratings[a] = self[a] + delta
    self._ratings[b] = self[b] - delta
    return delta

  def ratings(self) -> Dict[str, float]:
    return dict(self._ratings)


def performance_rating(opponents: Sequence[float], scores: Sequence[float],
                       spread: float = 800.0) -> float:
  """The rating R of a player that scored `scores` (each in [0, 1]) against
  players rated `opponents`, held fixed: the one whose expected scores add
  up to its own, sum_k elo_expected(R, R_k) = sum_k s_k (its maximum-
  likelihood rating under Elo's model). A perfect or nil total is placed
  `spread` beyond the highest or lowest opponent."""
  opponents = np.asarray(opponents, np.float64)
  total = float(np.sum(scores))
  if opponents.size == 0 or opponents.size != len(scores):
    raise ValueError(f'performance_rating needs one score per opponent, got '
                     f'{len(scores)} scores for {opponents.size} opponents.')
  low, high = opponents.min() - spread, opponents.max() + spread
  expected = lambda r: float(np.sum(elo_expected(r, opponents)))
  if total >= expected(high):
    return float(high)
  if total <= expected(low):
    return float(low)
  for _ in range(60):  # Bisection: the expected total rises with R.
    middle = (low + high) / 2.0
    low, high = (middle, high) if expected(middle) < total else (low, middle)
  return float((low + high) / 2.0)
