"""`league.json`: how a `League` keeps its state between runs (see league.py).

The file is rewritten atomically (a temporary file in the same directory,
then `os.replace`); it carries the league's id and identity, and a league
refuses one of another identity or one it cannot read, and never overwrites
one that another league wrote meanwhile.
"""

import json
import os
import tempfile
import time
from typing import Any, Mapping, Optional, Tuple

from absl import logging

from repertory.components.league import ratings


def learner_of(player: dict) -> str:
  """The learner a snapshot entry of league.json belongs to."""
  return player.get('learner', player['id'].rsplit('@v', 1)[0])


def _check_architecture(state: Mapping[str, Any], directory: str,
                        architecture: Optional[Mapping[str, Any]]) -> None:
  recorded = [state.get('architecture')] + [
      p.get('architecture') for p in state.get('players', [])]
  for other in recorded:
    if None not in (other, architecture) and other != architecture:
      raise ValueError(
          f'The league in {directory} holds snapshots of network {other}; '
          f'this run builds {architecture}. Use another run directory, or '
          "that league's network settings.")


def check_architecture(directory: str,
                       architecture: Optional[Mapping[str, Any]]) -> None:
  """Refuses (one line) a league in `directory` whose snapshots were
  recorded with another network `architecture` (nothing there: fine)."""
  path = os.path.join(directory, 'league.json')
  if architecture is None or not os.path.exists(path):
    return
  with open(path) as f:
    state = json.load(f)
  _check_architecture(state, directory,
                      json.loads(json.dumps(dict(architecture))))


def stat_key(path: str) -> Optional[Tuple[int, int, int]]:
  """(inode, size, mtime) of `path`, or None if there is none."""
  try:
    st = os.stat(path)
  except FileNotFoundError:
    return None
  return st.st_ino, st.st_size, st.st_mtime_ns

class LeagueFile:
  """The `league.json` side of `League` (a mixin: it reads and writes the
  League's own attributes)."""

  @property
  def path(self) -> str:
    return os.path.join(self._directory, 'league.json')

  def _load(self) -> None:
    if not os.path.exists(self.path):
      return
    try:
      with open(self.path) as f:
        state = json.load(f)
      players, last_snapshot = state['players'], state['last_snapshot']
      payoff = ratings.PayoffTable.from_state(state['payoff'])
      elo = ratings.Elo(state['elo_k'], ratings=state['elo'])
      games = int(state['games'])
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ValueError(
          f'{self.path} is not a league this code can read '
          f'({type(e).__name__}: {e}); a new league will not replace it: '
          'move it away or use another directory.') from e
    stored = state.get('identity')
    if (self._identity is not None and stored is not None and
        stored != self._identity):
      diff = ', '.join(
          f'{k}: {stored.get(k)!r} -> {self._identity.get(k)!r}'
          for k in sorted(set(stored) | set(self._identity))
          if stored.get(k) != self._identity.get(k))
      raise ValueError(
          f'{self.path} holds the league of another run ({diff}); a new '
          'league will not replace it: use another directory (--logdir) or '
          'move it away.')
    if self._identity is None:
      self._identity = stored
    _check_architecture(state, self._directory, self._architecture)
    if self._architecture is None:  # Kept as recorded (a reader's league).
      self._architecture = state.get('architecture')
    self._id = state.get('league_id') or self._id
    self._players = players
    self._retired = state.get('retired', [])
    self._last_snapshot = last_snapshot
    self._payoff = payoff
    self._elo = elo
    self._games = games
    self._resets = state.get('resets', {})
    self._written = stat_key(self.path)
    logging.info('League: continuing %s (%d snapshots, %d games, exploiter '
                 'generations ended: %s).', self.path, len(self._players),
                 self._games, self._resets or 'none')

  def save(self) -> None:
    """Writes `league.json` atomically (a temporary file in the same
    directory, then `os.replace`).

    Raises:
      RuntimeError: `league.json` changed since this league last read or
        wrote it and now holds another league (not replaced).
    """
    with self._lock:
      self._check_owner()
      state = {
          'league_id': self._id, 'identity': self._identity,
          'players': self._players, 'retired': self._retired,
          'last_snapshot': self._last_snapshot,
          'payoff': self._payoff.state(), 'elo': self._elo.ratings(),
          'elo_k': self._elo.k, 'games': self._games,
          'resets': self._resets,
          'matchmaking': self._rule_name,
          'architecture': self._architecture,
      }
      fd, tmp = tempfile.mkstemp(prefix='.league.json.', suffix='.tmp',
                                 dir=self._directory)
      try:
        with os.fdopen(fd, 'w') as f:
          json.dump(state, f)
          f.flush()
          os.fsync(f.fileno())
        os.replace(tmp, self.path)
      except BaseException:
        if os.path.exists(tmp):
          os.remove(tmp)
        raise
      self._written = stat_key(self.path)
      self._last_save = time.time()

  def _check_owner(self) -> None:
    """Refuses to overwrite a league.json that another league wrote."""
    key = stat_key(self.path)
    if key is None or key == self._written:
      return
    try:
      with open(self.path) as f:
        other = json.load(f).get('league_id')
    except (OSError, ValueError, AttributeError):
      other = 'unreadable'
    if other != self._id:
      raise RuntimeError(
          f'{self.path} now holds another league (id {other}; this one is '
          f'{self._id}): not replacing it. Two runs share this directory?')

  def _save_at_stop(self) -> None:
    """The stop handler: the league as it stands, and every report that
    still arrives while the program stops."""
    with self._lock:
      self._stopped = True
      self.save()
      logging.info('League: saved at stop to %s (%d snapshots, %d games, '
                   'exploiter generations ended: %s).', self.path,
                   len(self._players), self._games, self._resets or 'none')
