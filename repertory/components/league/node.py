"""The league node around any agent: snapshots of the learner's weights by
version, opponents per episode, payoffs and Elo.

    league = LeagueNode(logdir + '/league', learner, make_eval_actor,
                        matchmaking='pfsp', snapshot_every_versions=200)
    league.run()                                   # snapshots as versions pass
    [(opponent, version)] = league.sample_opponents(1)      # an environment
    version, variables = league.get_snapshot(opponent)      # once per id
    league.report([('main', opponent, 0.75)])               # per game

With `exploiters` (the learners of main exploiters 'exploiter0', ...;
exploiters.py builds them), `run()` also ends each exploiter's generation
when `League.due` says so (`exploiter_win_rate` against main or
`exploiter_reset_steps` of its learner's steps): its weights become a
snapshot of role 'exploiter' ('exploiter0@v40'), its learner restarts from
its state as built (`reset()`) and the league starts its next generation
(`reset_learner`). An exploiter's environments ask
`sample_opponents(n, 'exploiter0')`: main's newest snapshot.

With `exploitability` (a small two-player zero-sum OpenSpiel game's spec,
`exploitability.check_game`), each new snapshot is followed by OpenSpiel's
exploitability of the newest snapshot and of the pool's average policy,
and the newest snapshot's rating from exact payoffs (`elo_anchored`;
`exploitability.py`); with `rating_game` instead (a game too large to
traverse), by the newest snapshot's rating from sampled games
(`sampled_rating.py`). Both go to the league's own logs, and to the run
monitor's evaluation rows, which read them with `evaluation_metrics()`
(and, when the run finishes, `evaluation_metrics(final=True)`: of the
learner's final weights).

It knows no agent: the learner is any variable source (the agent's
`LearnerHost`), and which variable groups a snapshot holds is what the
agent's own evaluation actor (`make_eval_actor`, the one its run monitor
evaluates with) asks the learner for. A snapshot is those groups at one
version, frozen in `<directory>/weights/<id>.npz`; the pool, payoffs and
ratings are the `League`'s `league.json` beside them.

Consistency with the learner: when the node starts, snapshots newer than the
version the learner serves (a learner resumed from an older checkpoint after
a crash) are dropped, in one logged line; a snapshot's weights are written
before `league.json` names it.
"""

import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
from repertory import core
from repertory import launch
from repertory.components.league import league as league_lib
from repertory.components.league import storage

MAIN = 'main'


class _Recorder:
  """A variable source that forwards to `source` and records the names
  asked for (which groups the agent's evaluation actor reads)."""

  def __init__(self, source: Any):
    self._source = source
    self.names: List[str] = []

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    names = [names] if isinstance(names, str) else list(names)
    self.names = list(dict.fromkeys(self.names + names))
    return self._source.get_variables(names)

  def __getattr__(self, name: str) -> Any:
    if name.startswith('_'):
      raise AttributeError(name)
    return getattr(self._source, name)


class FrozenSource:
  """A variable source that serves one snapshot's variables forever, from
  memory: a `VariableClient` of it fetches on the caller's thread."""

  ANSWERS_AT_ONCE = True

  def __init__(self, version: int, variables: Mapping[str, Any]):
    self._version, self._variables = int(version), dict(variables)

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in self._variables]
    if unknown:
      raise KeyError(f'The snapshot holds no variables {unknown}; it holds '
                     f'{sorted(self._variables)}.')
    return core.VersionedVariables(self._version,
                                   [self._variables[n] for n in names])

  def get_variables_if_newer(self, names: Sequence[str], version: int):
    return None if version >= self._version else self.get_variables(names)


def variable_names(make_eval_actor: Callable[[Any], Any],
                   learner: Any) -> List[str]:
  """The variable groups the agent's evaluation actor reads."""
  recorder = _Recorder(learner)
  actor = make_eval_actor(recorder)
  actor.update(wait=True)
  close = getattr(actor, 'close', None)
  if callable(close):
    close()
  if not recorder.names:
    raise ValueError('The evaluation actor read no variables from its '
                     'source; the league cannot snapshot it.')
  return recorder.names


class LeagueNode:
  """A `League` of the learner's snapshots (see the module docstring).

  Args:
    directory: the league's directory (`<logdir>/league`).
    learner: the agent's learner (handle): a variable source.
    make_eval_actor: the agent's evaluation actor factory.
    matchmaking: a rule of `matchmaking.RULES` or 'alphastar'.
    snapshot_every_versions: a snapshot each time the learner's version
      passed this many versions since the last one (and one at the start).
    max_snapshots: the pool's size (the oldest but the first leave it).
    seed: the matchmaking's seed.
    logdir: where the league's metrics go (`<logdir>/league` in CSV and
      TensorBoard); None: terminal only.
    poll_seconds: how long one wait for a new version lasts.
    exploitability: the game's spec to compute exploitability on (None:
      not computed); see the module docstring.
    rating_game: without `exploitability`, the game's spec to rate
      snapshots on from sampled games (`sampled_rating.py`: `elo_anchored`,
      `rated_games` games against each of up to 8 rated snapshots); None:
      not rated.
    activation: the hidden activation of the agent's MLP policy weights,
      with which exploitability tabulates them and sampled ratings play
      them (the config's `activation`).
    exploiters: the main exploiters' learners (handles), 'exploiter<k>' the
      k-th; each a variable source with `status()` and `reset()`
      (`LearnerHost`).
    exploiter_win_rate, exploiter_reset_steps, min_games: when an
      exploiter's generation ends (see `League`).
  """

  def __init__(self, directory: str, learner: Any,
               make_eval_actor: Callable[[Any], Any],
               matchmaking: str = 'pfsp', snapshot_every_versions: int = 200,
               max_snapshots: int = 1000, seed: int = 0,
               logdir: Optional[str] = None, poll_seconds: float = 2.0,
               elo_k: float = 16.0, exploitability: Optional[str] = None,
               exploiters: Sequence[Any] = (),
               exploiter_win_rate: float = 0.7,
               exploiter_reset_steps: Optional[int] = None,
               min_games: int = 100, activation: str = 'relu',
               rating_game: Optional[str] = None, rated_games: int = 50):
    if snapshot_every_versions < 1:
      raise ValueError('snapshot_every_versions must be >= 1, got '
                       f'{snapshot_every_versions}.')
    self._league = league_lib.League(
        directory, None, matchmaking=matchmaking, latest_is_live=False,
        snapshot_every_steps=None, max_snapshots=max_snapshots,
        elo_k=elo_k, seed=seed, min_games=min_games,
        exploiter_win_rate=exploiter_win_rate,
        exploiter_reset_steps=exploiter_reset_steps)
    self._exploiters = {league_lib.exploiter_name(k): learner
                        for k, learner in enumerate(exploiters)}
    self._weights = storage.WeightStore(os.path.join(directory, 'weights'))
    self._learner = learner
    self._make_eval_actor = make_eval_actor
    self._every = snapshot_every_versions
    self._poll = poll_seconds
    self._names: Optional[List[str]] = None  # Set once started.
    self._start_lock = threading.Lock()
    self._template: Optional[Dict[str, Any]] = None
    self._loaded: Dict[str, Tuple[int, Dict[str, Any]]] = {}
    self._exploitability = exploitability
    self._rating_game, self._rated_games = rating_game, rated_games
    self._seed = seed
    self._activation = activation
    self._metric = None  # Built once started (it loads the game).
    self._metric_lock = threading.Lock()
    self._figures: Dict[str, float] = {}
    self._logger = None
    if logdir:
      from repertory.components import loggers  # pylint: disable=g-import-not-at-top
      self._logger = loggers.make_logger('league', logdir=logdir,
                                         time_delta=10.0, use_csv=True)

  # --- snapshots ---------------------------------------------------------------

  def _ensure_started(self) -> None:
    """`_start()` once, by whichever comes first: `run()` or an
    environment's first call."""
    with self._start_lock:
      if self._names is None:
        self._start()

  def _start(self) -> None:
    """Learns the groups to snapshot, drops snapshots the learner is behind
    (after a crash), takes the first."""
    names = variable_names(self._make_eval_actor, self._learner)
    version, values = self._learner.get_variables(names)
    self._template = dict(zip(names, values))
    dropped = self._league.drop_newer(MAIN, version)
    for player in dropped:
      self._weights.remove(player)
    if dropped:
      logging.warning(
          'League: dropped %d snapshot(s) newer than the learner\'s version '
          '%d (%s..%s): it resumed from an older checkpoint, which holds no '
          'weights of theirs.', len(dropped), version, dropped[0], dropped[-1])
    if self._league.newest(MAIN) is None:
      self._add(version, self._template)
    self._names = names  # Started.
    if self._exploitability is not None:
      from repertory.components.league import exploitability  # pylint: disable=g-import-not-at-top
      self._metric = exploitability.Exploitability(
          self._exploitability, self._make_eval_actor, self._activation)
    elif self._rating_game is not None:
      from repertory.components.league import sampled_rating  # pylint: disable=g-import-not-at-top
      self._metric = sampled_rating.SampledRating(
          self._rating_game, self._make_eval_actor, self._rated_games,
          self._activation, self._seed)

  def _add(self, version: int, variables: Mapping[str, Any],
           learner: str = MAIN, step: Optional[int] = None) -> str:
    player = league_lib.snapshot_id(learner, version)
    self._weights.save(player, variables)  # Before league.json names it.
    self._loaded[player] = (int(version), dict(variables))
    return self._league.add_player(
        None, version, version if step is None else step, learner)

  def snapshot(self) -> Optional[str]:
    """Adds a snapshot if the learner is `snapshot_every_versions` past the
    newest; returns its id (None: not due)."""
    self._ensure_started()
    newest = self._league.newest(MAIN)
    due = 0 if newest is None else newest[1] + self._every
    wait = getattr(self._learner, 'wait_for_version', None)
    if callable(wait):
      try:  # LearnerHost's returns the version; VariableStore's raises.
        if wait(due, timeout_s=self._poll) < due:
          return None
      except TimeoutError:
        return None
    version, values = self._learner.get_variables(self._names)
    if newest is not None and version < due:
      if not callable(wait):
        time.sleep(self._poll)
      return None
    return self._add(version, dict(zip(self._names, values)))

  def run(self) -> None:
    """Takes snapshots as the learner's versions pass, until the stop."""
    stop = launch.stop_event()
    self._ensure_started()
    if self._metric is not None:
      self.measure()
    while not stop.is_set():
      self.end_generations()
      added = self.snapshot()
      if added is not None and self._metric is not None:
        self.measure()
      if self._logger is not None:
        self._logger.write(dict(self._league.summary(), **self._figures))

  def end_generations(self) -> List[str]:
    """Ends each exploiter's generation that is due (see the module
    docstring); returns the snapshots added."""
    self._ensure_started()
    added = []
    for name, learner in self._exploiters.items():
      step = int(learner.status()['learner/steps'])
      if not self._league.due(name, step):
        continue
      version, values = learner.get_variables(self._names)
      added.append(self._add(version, dict(zip(self._names, values)), name,
                             step))
      learner.reset()
      self._league.reset_learner(name, step)
    return added

  # --- exploitability and anchored ratings ------------------------------------------

  def measure(self) -> Dict[str, float]:
    """Exploitability of the newest snapshot and of the pool's average
    with the newest's anchored rating (`exploitability_version`: its
    version), or that rating from sampled games (`elo_anchored_version`);
    kept for `evaluation_metrics`."""
    if self._metric is None:
      return {}
    players = [p for p in self._league.players() if p['learner'] == MAIN]
    with self._metric_lock:
      for p in players:
        self._metric.add(p['id'], self.get_snapshot(p['id'])[1], p['version'])
      self._metric.keep([p['id'] for p in players])
      figures = self._metric.figures()
      figures[self._version_key()] = players[-1]['version']
    if 'exploitability' in figures:
      logging.info('League: exploitability %.4f (version %d), pool average '
                   '%.4f over %d snapshots; anchored Elo %.1f.',
                   figures['exploitability'],
                   figures['exploitability_version'],
                   figures['exploitability_pool'],
                   figures['exploitability_snapshots'],
                   figures['elo_anchored'])
    else:
      logging.info('League: anchored Elo %.1f (version %d, from sampled '
                   'games).', figures['elo_anchored'],
                   figures['elo_anchored_version'])
    self._figures = figures
    return dict(figures)

  def _version_key(self) -> str:
    """The name of the rated weights' version among the figures."""
    return ('exploitability_version' if self._exploitability is not None
            else 'elo_anchored_version')

  def evaluation_metrics(self, final: bool = False) -> Dict[str, float]:
    """The latest `measure()` figures ({} before any, or with neither
    metric); `final`: of the learner's weights now (with the pool's
    average)."""
    if self._metric is None:
      self._ensure_started()
      if self._metric is None:
        return {}
    if not final:
      return dict(self._figures)
    if not self._figures:
      self.measure()
    version, values = self._learner.get_variables(self._names)
    with self._metric_lock:
      self._figures = self._metric.figures_of(
          dict(zip(self._names, values)), version)
      self._figures[self._version_key()] = int(version)
    return dict(self._figures)

  # --- what environments call ---------------------------------------------------

  def sample_opponents(self, n: int = 1, learner: str = MAIN
                       ) -> List[Tuple[str, int]]:
    """`n` opponents (id, version) for `learner`'s next episodes (main's,
    or an exploiter's); a live pick (AlphaStar's self-play share) is main's
    newest snapshot."""
    self._ensure_started()
    newest = self._league.newest(MAIN)
    picks = self._league.sample_opponents(learner, n)
    return [newest if v == league_lib.LIVE_VERSION and newest else (p, v)
            for p, v in picks]

  def get_snapshot(self, player: str) -> Tuple[int, Dict[str, Any]]:
    """(version, {group: variables}) of snapshot `player`."""
    self._ensure_started()
    if player not in self._loaded:
      entry = next((p for p in self._league.players() if p['id'] == player),
                   None)
      if entry is None:
        raise KeyError(f'No snapshot {player!r} in the league.')
      self._loaded[player] = (entry['version'],
                              self._weights.load(player, self._template))
    return self._loaded[player]

  def report(self, results: List[Tuple[str, str, float]]) -> None:
    """Finished games: (player, opponent, player's score in [0, 1])."""
    self._league.report(results)

  def summary(self) -> Dict[str, float]:
    return self._league.summary()

  def players(self) -> List[dict]:
    return self._league.players()

  def table(self) -> List[dict]:
    return self._league.table()

