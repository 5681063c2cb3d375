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
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from absl import logging
import numpy as np

from repertory import launch
from repertory.components.league import league_file
from repertory.components.league import league_results
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


_learner_of = league_file.learner_of
check_architecture = league_file.check_architecture


class League(league_file.LeagueFile, league_results.LeagueResults):
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
    self.check_exploiter_settings(exploiter_win_rate, exploiter_reset_steps)
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

  @staticmethod
  def check_exploiter_settings(win_rate: float,
                               reset_steps: Optional[int]) -> None:
    """Refuses (one line) settings that never end a generation."""
    if not 0 < win_rate <= 1:
      raise ValueError(f'exploiter_win_rate must be in (0, 1], got '
                       f'{win_rate}.')
    if reset_steps is not None and reset_steps < 1:
      raise ValueError(f'exploiter_reset_steps must be >= 1 or None, got '
                       f'{reset_steps}.')

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
    with self._lock:
      if not self.due(role, step):
        return None
      return self.add_player(weights, version, step, role)

  def due(self, learner: str, step: int) -> bool:
    """Whether `maybe_add` would add a snapshot of `learner` at `step`."""
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
      return due

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
