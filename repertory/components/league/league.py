"""A league: a pool of frozen policies, matchmaking, payoffs and Elo.

    league = League(logdir + '/league', make_network, matchmaking='pfsp',
                    snapshot_every_steps=500, snapshot_win_rate=0.7)
    league.maybe_add(weights, version, step)          # learner, periodically
    [(opponent, version)] = league.sample_opponents('main', 1)  # actor
    version, weights = league.get_weights(opponent)   # actor, once per id
    league.report([('main', opponent, 1.0)])          # actor, per game
    league.summary()                                  # Elo, win rates, sizes

Players are learners (live, their weights change: 'main', and main
exploiters 'exploiter0', 'exploiter1', ... of role 'exploiter') and frozen
snapshots of them ('main@v120': the main agent's weights at policy version
120; 'exploiter0@v40'), each tagged with its role. Opponents are sampled per
episode: the main agent by the `matchmaking` rule over every snapshot (its
own and the exploiters'), an exploiter always meets the main agent's newest
snapshot (AlphaStar's main exploiters play the current main agent). Every
finished game updates the payoff table and Elo.

The main agent's snapshots are added on a schedule (every
`snapshot_every_steps` learner steps) or when it beats the pool by a margin
(mean score >= `snapshot_win_rate` over at least `min_games` games since its
last snapshot), as AlphaStar's league does. An exploiter's generation ends
(AlphaStar's main-exploiter rule) when its mean score against main since its
last reset reaches `exploiter_win_rate` (after `min_games`) or after
`exploiter_reset_steps` learner steps: `maybe_add` then freezes it into the
pool, and its learner resets its weights and calls `reset_learner`:

    if league.maybe_add(weights, version, step, 'exploiter0'):  # generation over
      ...  # the exploiter learner resets its network and optimizer
      league.reset_learner('exploiter0', step)

The snapshots' weights live in a `ModelStore` (tagged checkpoints, one tag
per snapshot, outside the rotation) and the rest (players, payoffs,
ratings, roles, exploiter generations) in `league.json`, both under
`directory`: a League created again on the same directory continues the
same league. `league.json` is rewritten atomically (a temporary file in
the same directory, then `os.replace`) after each snapshot and reset, every
`save_every_seconds` of reports, and when the launched program stops. It
carries the league's id and `identity` (e.g. the game and network): a
League refuses a `league.json` of another identity or one it cannot read,
and never overwrites a `league.json` that another league wrote meanwhile.
"""

import json
import os
import re
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from absl import logging
import numpy as np

from repertory import launch
from repertory.components.league import matchmaking as matchmaking_lib
from repertory.components.league import ratings

LIVE_VERSION = -1  # The version sample_opponents gives a live learner.
ROLES = ('main', 'exploiter')
# Whose snapshots each learner role meets.
OPPONENT_ROLES = {'main': ('main', 'exploiter'), 'exploiter': ('main',)}
_EXPLOITER = re.compile(r'exploiter\d*')


def snapshot_id(learner: str, version: int) -> str:
  """'main@v120': `learner`'s weights at policy version `version`."""
  return f'{learner}@v{int(version)}'


def exploiter_name(index: int) -> str:
  """The learner name of the `index`-th main exploiter: 'exploiter<index>'."""
  return f'exploiter{int(index)}'


def learner_role(learner: str) -> str:
  """'main' -> 'main'; 'exploiter', 'exploiter<k>' -> 'exploiter'."""
  if learner == 'main':
    return 'main'
  if isinstance(learner, str) and _EXPLOITER.fullmatch(learner):
    return 'exploiter'
  raise ValueError(f'Unknown role {learner!r}; roles: {", ".join(ROLES)} '
                   "(learners: 'main', 'exploiter<k>').")


def _learner_of(player: dict) -> str:
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


def _stat_key(path: str) -> Optional[Tuple[int, int, int]]:
  """(inode, size, mtime) of `path`, or None if there is none."""
  try:
    st = os.stat(path)
  except FileNotFoundError:
    return None
  return st.st_ino, st.st_size, st.st_mtime_ns


class League:
  """The pool, its matchmaking, payoff table and ratings (thread-safe).

  Args:
    directory: where the league lives (created if needed; continued if it
      holds one).
    make_network: builds the policy network (variables created) that the
      model store saves snapshots from; None for a league without weights
      storage (`add_player` then only records players).
    matchmaking: a rule of `matchmaking.RULES` ('latest', 'uniform', 'pfsp',
      'pfsp_variance') or `matchmaking.MAIN_RULES` ('alphastar': the main
      agent's mix of PFSP, verification and self-play).
    latest_is_live: with 'latest', the opponent is the live learner itself
      (naive self-play) rather than its newest snapshot.
    snapshot_every_steps: add a snapshot once this many learner steps passed
      since the learner's last one (None: never by schedule).
    snapshot_win_rate: add one once the learner's mean score against the pool
      since its last snapshot reaches this (None: never by margin).
    min_games: games needed before the margin rule applies.
    max_snapshots: the oldest snapshots (never the first) leave the pool
      beyond this many (their weights stay tagged on disk).
    elo_k: Elo's k.
    exploiter_win_rate: an exploiter's generation ends once its mean score
      against main since its last reset reaches this (after `min_games`).
    exploiter_reset_steps: ...or after this many of its learner steps
      (None: by win rate only).
    seed: seed of the opponent sampler.
    save_every_seconds: `league.json` is rewritten at most this often after
      reports (always after a snapshot is added or an exploiter reset, on
      `save()`, and when the launched program stops).
    identity: what makes a `league.json` this league's (JSON-serialisable,
      e.g. {'env': ..., 'hidden_sizes': ...}); a directory holding a league
      of another identity is refused, not replaced.
    architecture: what rebuilds `make_network`'s network (a JSON dict, e.g.
      {'network': 'lstm_policy_value', 'hidden_sizes': [64], 'lstm_size':
      64}), recorded with every snapshot; a directory whose league was
      recorded with another one is refused (its snapshots would not load).
  """

  def __init__(self, directory: str,
               make_network: Optional[Callable[[], Any]] = None,
               matchmaking: str = 'pfsp',
               latest_is_live: bool = True,
               snapshot_every_steps: Optional[int] = 1000,
               snapshot_win_rate: Optional[float] = None,
               min_games: int = 100,
               max_snapshots: int = 1000,
               elo_k: float = 16.0,
               exploiter_win_rate: float = 0.7,
               exploiter_reset_steps: Optional[int] = None,
               seed: int = 0,
               save_every_seconds: float = 10.0,
               architecture: Optional[Mapping[str, Any]] = None,
               identity: Optional[Mapping[str, Any]] = None):
    self._rule_name = matchmaking
    self._architecture = (None if architecture is None
                          else json.loads(json.dumps(dict(architecture))))
    self._rule = matchmaking_lib.get(matchmaking)
    if snapshot_every_steps is not None and snapshot_every_steps < 1:
      raise ValueError(
          f'snapshot_every_steps must be >= 1 or None, got '
          f'{snapshot_every_steps}.')
    if snapshot_win_rate is not None and not 0 < snapshot_win_rate <= 1:
      raise ValueError(f'snapshot_win_rate must be in (0, 1] or None, got '
                       f'{snapshot_win_rate}.')
    if not 0 < exploiter_win_rate <= 1:
      raise ValueError(f'exploiter_win_rate must be in (0, 1], got '
                       f'{exploiter_win_rate}.')
    if exploiter_reset_steps is not None and exploiter_reset_steps < 1:
      raise ValueError(f'exploiter_reset_steps must be >= 1 or None, got '
                       f'{exploiter_reset_steps}.')
    if max_snapshots < 2:
      raise ValueError(f'max_snapshots must be >= 2, got {max_snapshots}.')
    self._directory = directory
    self._latest_is_live = latest_is_live
    self._every_steps = snapshot_every_steps
    self._win_rate = snapshot_win_rate
    self._min_games = min_games
    self._exploiter_win_rate = exploiter_win_rate
    self._exploiter_steps = exploiter_reset_steps
    self._max_snapshots = max_snapshots
    self._rng = np.random.default_rng(seed)
    self._save_every = save_every_seconds
    self._lock = threading.RLock()
    os.makedirs(directory, exist_ok=True)
    self._network = None
    self._store = None
    if make_network is not None:
      from repertory.components import model_store  # pylint: disable=g-import-not-at-top
      self._network = make_network()
      self._store = model_store.ModelStore(
          os.path.join(directory, 'snapshots'), {'network': self._network},
          max_to_keep=1)
    self._weights: Dict[str, Tuple[int, Any]] = {}  # Cache of loaded ones.
    # Persistent state (league.json).
    self._players: List[dict] = []  # Snapshots, oldest first.
    self._retired: List[str] = []
    # learner -> {step, games, points} since its last snapshot (main) or
    # reset (exploiters).
    self._last_snapshot: Dict[str, dict] = {}
    self._resets: Dict[str, int] = {}  # exploiter -> generations ended.
    self._payoff = ratings.PayoffTable()
    self._elo = ratings.Elo(elo_k)
    self._games = 0
    self._last_save = 0.0
    try:  # Tuples and lists alike, as league.json will hold them.
      self._identity = (None if identity is None else
                        json.loads(json.dumps(dict(identity))))
    except TypeError as e:
      raise ValueError(f'League identity must be JSON-serialisable: {e}') from e
    self._id = uuid.uuid4().hex  # Replaced by a continued league's own.
    self._written = None  # os.stat key of the league.json last read/written.
    self._stopped = False
    self._load()
    if launch.get_launch_type() is not None:  # A node of a launched program.
      launch.register_stop_handler(self._save_at_stop)

  # --- persistence ------------------------------------------------------------

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
    self._written = _stat_key(self.path)
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
      self._written = _stat_key(self.path)
      self._last_save = time.time()

  def _check_owner(self) -> None:
    """Refuses to overwrite a league.json that another league wrote."""
    key = _stat_key(self.path)
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

  # --- the pool ---------------------------------------------------------------

  def players(self) -> List[dict]:
    """The snapshots in the pool, oldest first: {id, role, learner, version,
    step, elo}."""
    with self._lock:
      return [dict(p, learner=_learner_of(p), elo=self._elo[p['id']])
              for p in self._players]

  def add_player(self, weights: Optional[Mapping[str, np.ndarray]],
                 version: int, step: int, role: str = 'main') -> str:
    """Freezes learner `role`'s weights as a snapshot; returns its id.

    `role` names the learner ('main', 'exploiter0', ...); the snapshot is
    tagged with its role ('main' or 'exploiter').
    """
    learner = role
    role = learner_role(learner)
    player = snapshot_id(learner, version)
    with self._lock:
      if any(p['id'] == player for p in self._players):
        return player
      if self._store is not None:
        if weights is None:
          raise ValueError('add_player needs the weights of the snapshot.')
        from repertory.components import networks  # pylint: disable=g-import-not-at-top
        networks.assign_variables(self._network, weights)
        index = len(self._players) + len(self._retired) + 1
        self._store.save(index, step)
        self._store.tag(index, player)
        self._weights[player] = (int(version), dict(weights))
      self._players.append({'id': player, 'role': role, 'learner': learner,
                            'version': int(version), 'step': int(step),
                            'time': time.time()})
      if self._architecture is not None:
        self._players[-1]['architecture'] = self._architecture
      self._elo.set(player, self._elo[learner])  # It starts where its learner is.
      self._last_snapshot[learner] = {'step': int(step), 'games': 0,
                                      'points': 0.0}
      if len(self._players) > self._max_snapshots:
        retired = self._players.pop(1)  # Keep the first (the weakest anchor).
        self._retired.append(retired['id'])
      self.save()
    logging.info('League: added %s (pool of %d).', player, len(self._players))
    return player

  def maybe_add(self, weights: Optional[Mapping[str, np.ndarray]],
                version: int, step: int, role: str = 'main') -> Optional[str]:
    """Adds a snapshot of learner `role` if one is due; returns its id.

    Main: on its schedule, by its margin, or when it has none yet. An
    exploiter: when its generation is over (`exploiter_win_rate` against
    main, or `exploiter_reset_steps` steps since its reset); a returned id
    means its learner must reset and call `reset_learner`.
    """
    learner = role
    exploiter = learner_role(learner) == 'exploiter'
    with self._lock:
      last = self._last_snapshot.get(learner)
      if exploiter:
        if last is None:  # Its first generation, from its step 0 (no games
          # reported yet: it played only itself before main's first snapshot).
          last = self._last_snapshot[learner] = {'step': 0, 'games': 0,
                                                 'points': 0.0}
        if step < last['step']:  # Its learner resumed from an older step.
          logging.info('League: %s offers step %d, before its reset at step '
                       '%d (resumed from an older checkpoint); its '
                       'generation counts steps from %d.', learner, step,
                       last['step'], step)
          last['step'] = int(step)
        due = (self._exploiter_steps is not None and
               step - last['step'] >= self._exploiter_steps)
        due = due or (last['games'] >= self._min_games and
                      last['points'] / last['games'] >=
                      self._exploiter_win_rate)
      else:
        due = last is None
        if not due and self._every_steps is not None:
          due = step - last['step'] >= self._every_steps
        if not due and self._win_rate is not None:
          due = (last['games'] >= self._min_games and
                 last['points'] / last['games'] >= self._win_rate)
      if not due:
        return None
      return self.add_player(weights, version, step, learner)

  def reset_learner(self, learner: str, step: int,
                    like: Optional[str] = None) -> None:
    """Starts an exploiter's next generation at `step`: a new win-rate
    window, and its Elo back to the initial rating (or `like`'s, the player
    whose weights it restarts from)."""
    if learner_role(learner) != 'exploiter':
      raise ValueError(f'reset_learner resets exploiters; got {learner!r}.')
    with self._lock:
      self._last_snapshot[learner] = {'step': int(step), 'games': 0,
                                      'points': 0.0}
      self._elo.set(learner, self._elo.initial if like is None
                    else self._elo[like])
      self._resets[learner] = self._resets.get(learner, 0) + 1
      self.save()
    logging.info('League: %s reset at step %d (generation %d).', learner,
                 step, self._resets[learner] + 1)

  def drop_newer(self, learner: str, version: int) -> List[str]:
    """Removes `learner`'s snapshots newer than `version` (a learner that
    resumed from an older checkpoint); returns their ids, oldest first."""
    with self._lock:
      dropped = [p['id'] for p in self._players
                 if _learner_of(p) == learner and p['version'] > version]
      if dropped:
        self._players = [p for p in self._players if p['id'] not in dropped]
        self.save()
      return dropped

  def newest(self, learner: str = 'main') -> Optional[Tuple[str, int]]:
    """(id, version) of `learner`'s newest snapshot in the pool, or None."""
    with self._lock:
      mine = [p for p in self._players if _learner_of(p) == learner]
      return (mine[-1]['id'], mine[-1]['version']) if mine else None

  def get_weights(self, player: str) -> Tuple[int, Any]:
    """(version, weights) of a snapshot, from the model store."""
    with self._lock:
      if player in self._weights:
        return self._weights[player]
      entry = next((p for p in self._players if p['id'] == player), None)
      if entry is None and player not in self._retired:
        raise KeyError(f'No snapshot {player!r} in the league; snapshots: '
                       f'{[p["id"] for p in self._players]}.')
      if self._store is None:
        raise RuntimeError('This league stores no weights (make_network=None).')
      from repertory.components import networks  # pylint: disable=g-import-not-at-top
      self._store.restore(tag=player)
      version = (entry['version'] if entry is not None
                 else int(player.rsplit('@v', 1)[1]))
      self._weights[player] = (version,
                               networks.get_variables(self._network))
      return self._weights[player]

  # --- matchmaking ------------------------------------------------------------

  def sample_opponents(self, learner: str = 'main',
                       n: int = 1) -> List[Tuple[str, int]]:
    """`n` opponents (id, version) for `learner`'s next `n` episodes.

    The main agent's come from the matchmaking rule over every snapshot; an
    exploiter's are the main agent's newest snapshot. A live opponent (the
    learner itself: naive self-play with 'latest', or while the pool has no
    snapshot it may meet) has version LIVE_VERSION.
    """
    role = learner_role(learner)
    with self._lock:
      live = [(learner, LIVE_VERSION)] * n
      if role == 'exploiter':
        main = [p for p in self._players if _learner_of(p) == 'main']
        if not main:
          return live
        return [(main[-1]['id'], main[-1]['version'])] * n
      if self._rule_name == 'latest' and self._latest_is_live:
        return live
      pool = [p for p in self._players
              if p['role'] in OPPONENT_ROLES[role]]
      if not pool:
        return live
      ids = [p['id'] for p in pool]
      win_rates = self._payoff.win_rates(learner, ids)
      if self._rule_name in matchmaking_lib.MAIN_RULES:
        roles = [p['role'] for p in pool]
        picks = [self._rule(roles, win_rates, self._rng) for _ in range(n)]
      else:
        picks = [self._rule(win_rates, self._rng) for _ in range(n)]
      return [(learner, LIVE_VERSION) if i is None else
              (ids[i], pool[i]['version']) for i in picks]

  # --- results ----------------------------------------------------------------

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
            learner_role(a) == 'exploiter'):  # Before its learner's first offer.
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
        exploiter = learner_role(learner) == 'exploiter'
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
      return [{'id': i, 'role': roles.get(i) or learner_role(i),
               'elo': self._elo[i],
               'games': self._payoff.totals(i, ids)[0]} for i in ids]
