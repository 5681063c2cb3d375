"""The environment an agent plays in a league: one seat of a two-player game
whose other seat is a snapshot the league picked for that episode, played by
the agent's own evaluation actor.

    env = LeagueGame('openspiel:kuhn_poker', league, make_eval_actor)(seed=0)

`LeagueGame` is the picklable factory an agent's program receives as
`experiment.env`; inside a node, its `league` handle arrives dereferenced
(or is dereferenced when the first environment is made). Each environment
asks the league for opponents a few episodes at a time, loads a snapshot's
weights once (a small cache), and reports each finished game: the seat's
payoff scaled to [0, 1] by the game's payoff range (chips in poker), or
win 1 / draw 0.5 / loss 0 where the game does not say.
"""

import collections
import dataclasses
from typing import Any, Callable, List, Optional, Tuple

import dm_env
import numpy as np

from repertory import environments
from repertory import launch
from repertory.components.league import node as node_lib
from repertory.components.league import ratings
from repertory.environments.multiagent import seat as seat_lib

_CACHED = 16        # Snapshots' actors kept per environment.
_SAMPLE_AHEAD = 8   # Opponents asked for at once.
_REPORT_EVERY = 16  # Games per report.


class SnapshotOpponent:
  """A snapshot played by the agent's evaluation actor, on flat views."""

  def __init__(self, make_eval_actor: Callable[[Any], Any], version: int,
               variables: Any, seed: int = 0):
    self._actor = make_eval_actor(node_lib.FrozenSource(version, variables))
    self._actor.update(wait=True)
    self._rng = np.random.default_rng(seed)
    self._fresh = True

  def new_game(self) -> None:
    self._fresh = True

  def __call__(self, timestep: dm_env.TimeStep, player: int) -> int:
    view = seat_lib.flat_view(timestep, player)
    if self._fresh:
      self._actor.observe_first(dm_env.restart(view))
      self._fresh = False
    action = int(np.asarray(self._actor.select_action(view)).reshape(-1)[0])
    return seat_lib.legal_or_random(action, timestep, player, self._rng)


def game_score(seat_return: float, payoff: Optional[Tuple[float, float]],
               other_return: float) -> float:
  """The seat's score in [0, 1]: its payoff scaled by the game's range, or
  win/draw/loss where the range is unknown."""
  if payoff is None or payoff[1] <= payoff[0]:
    return ratings.score_from_returns(seat_return, other_return)
  low, high = payoff
  return float(np.clip((seat_return - low) / (high - low), 0.0, 1.0))


class LeagueSeat(seat_lib.SeatEnvironment):
  """A seat against the league's opponent of the episode (see module)."""

  def __init__(self, game: Any, league: Any,
               make_eval_actor: Callable[[Any], Any], seed: int = 0,
               learner: str = node_lib.MAIN):
    self._league, self._make_eval_actor = league, make_eval_actor
    self._learner = learner
    self._seed = seed
    self._cache: 'collections.OrderedDict[str, SnapshotOpponent]' = (
        collections.OrderedDict())
    self._queue: List[Tuple[str, int]] = []
    self._results: List[Tuple[str, str, float]] = []
    self._opponent_id = ''
    self._current: Optional[SnapshotOpponent] = None
    super().__init__(game, self._play, 'alternate')
    self._payoff = seat_lib.payoff_range(game)

  def _client(self) -> Any:
    """The league's client (a handle that reached a node inside a factory
    such as a `functools.partial` is dereferenced here, at first use)."""
    if isinstance(self._league, launch.Handle):
      self._league = self._league.dereference()
    return self._league

  def _play(self, timestep: dm_env.TimeStep, player: int) -> int:
    return self._current(timestep, player)

  def _opponent(self, player: str) -> SnapshotOpponent:
    opponent = self._cache.get(player)
    if opponent is None:
      if self._make_eval_actor is None:
        raise ValueError('This league environment has no evaluation actor to '
                         'play opponents with: build the program with '
                         'league.make_program.')
      version, variables = self._client().get_snapshot(player)
      opponent = SnapshotOpponent(self._make_eval_actor, version, variables,
                                  self._seed + len(self._cache))
      self._cache[player] = opponent
      if len(self._cache) > _CACHED:
        self._cache.popitem(last=False)
    self._cache.move_to_end(player)
    return opponent

  def reset(self) -> dm_env.TimeStep:
    if not self._queue:
      self._queue = list(self._client().sample_opponents(
          _SAMPLE_AHEAD, self._learner))[::-1]
    self._opponent_id, _ = self._queue.pop()
    self._current = self._opponent(self._opponent_id)
    self._current.new_game()
    return super().reset()

  def step(self, action: Any) -> dm_env.TimeStep:
    timestep = super().step(action)
    if timestep.last():
      score = game_score(self.episode_return, self._payoff,
                         -self.episode_return)
      self._results.append((self._learner, self._opponent_id, score))
      if len(self._results) >= _REPORT_EVERY:
        self.flush()
    return timestep

  def flush(self) -> None:
    """Sends the games not reported yet to the league."""
    if self._results:
      self._client().futures.report(self._results)
      self._results = []

  def close(self) -> None:
    try:
      self.flush()
    except Exception:  # pylint: disable=broad-except
      pass  # The league went away first (the program is stopping).
    super().close()


@dataclasses.dataclass
class LeagueGame:
  """The picklable factory of `LeagueSeat`s (an agent's `experiment.env`).

  Attributes:
    game: the two-player game (a spec such as 'openspiel:kuhn_poker').
    league: the league node (handle; a client inside a node).
    make_eval_actor: the agent's evaluation actor factory (set once the
      agent's program is built: its run monitor's).
    learner: whose games these are: 'main', or a main exploiter
      'exploiter<k>' (its opponent is main's newest snapshot).
  """
  game: Any
  league: Any
  make_eval_actor: Optional[Callable[[Any], Any]] = None
  learner: str = node_lib.MAIN

  def __call__(self, seed: Optional[int] = None) -> seat_lib.SeatEnvironment:
    return LeagueSeat(environments.make(self.game, seed=seed), self.league,
                      self.make_eval_actor, seed or 0, self.learner)
