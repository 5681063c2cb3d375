"""The results side of a `League` (see league.py): finished games into the
payoff table and Elo, and the figures and table read from them."""

import time
from typing import Dict, List, Tuple




def _role(learner: str) -> str:
  from repertory.components.league import league  # pylint: disable=g-import-not-at-top
  return league.learner_role(learner)


class LeagueResults:
  """`report`, `payoff`, `games`, `elo`, `summary`, `table` of `League` (a
  mixin: it reads and writes the League's own attributes)."""

  def report(self, results: List[Tuple[str, str, float]]) -> None:
    """Records finished games (player, opponent, player's score in [0, 1]).

    Games of a learner against itself change nothing but the game count.
    """
    with self._lock:
      for a, b, score in results:
        self._games += 1
        if a == b:
          continue
        if (a not in self._last_snapshot and '@' not in a and
            _role(a) == 'exploiter'):  # Before its learner's first offer.
          self._last_snapshot[a] = {'step': 0, 'games': 0, 'points': 0.0}
        self._payoff.record(a, b, float(score))
        self._elo.update(a, b, float(score))
        for player, points in ((a, score), (b, 1.0 - score)):
          if player in self._last_snapshot:
            window = self._last_snapshot[player]
            window['games'] += 1
            window['points'] += float(points)
      if (self._stopped or
          time.time() - self._last_save >= self._save_every):
        self.save()

  def payoff(self, a: str, b: str) -> float:
    """a's mean score against b (0.5 before they met)."""
    with self._lock:
      return self._payoff.win_rate(a, b)

  def games(self, a: str, b: str) -> int:
    with self._lock:
      return self._payoff.games(a, b)

  def elo(self) -> Dict[str, float]:
    """Every player's rating (learners and snapshots)."""
    with self._lock:
      return {p: self._elo[p] for p in
              list(self._last_snapshot) + [q['id'] for q in self._players]}

  def summary(self) -> Dict[str, float]:
    """Figures to log: pool size, games, each learner's Elo and its mean score
    against the pool since its last snapshot (an exploiter's: against main
    since its last reset, also as `win_rate_vs_main`, and its `resets`), and
    main's mean score against the exploiters' snapshots."""
    with self._lock:
      out = {'league/snapshots': len(self._players),
             'league/games': self._games}
      for learner, window in self._last_snapshot.items():
        out[f'league/{learner}/elo'] = self._elo[learner]
        exploiter = _role(learner) == 'exploiter'
        if window['games']:
          rate = window['points'] / window['games']
          out[f'league/{learner}/win_rate_vs_pool'] = rate
          if exploiter:
            out[f'league/{learner}/win_rate_vs_main'] = rate
        if exploiter:
          out[f'league/{learner}/resets'] = self._resets.get(learner, 0)
      exploiters = [p['id'] for p in self._players
                    if p['role'] == 'exploiter']
      games, points = self._payoff.totals('main', exploiters)
      if games:
        out['league/main/win_rate_vs_exploiters'] = points / games
      return out

  def table(self) -> List[dict]:
    """Every player, learners first: {id, role, elo, games} (games against
    other players, as the payoff table counts them)."""
    with self._lock:
      ids = list(self._last_snapshot) + [p['id'] for p in self._players]
      roles = {p['id']: p['role'] for p in self._players}
      return [{'id': i, 'role': roles.get(i) or _role(i),
               'elo': self._elo[i],
               'games': self._payoff.totals(i, ids)[0]} for i in ids]
