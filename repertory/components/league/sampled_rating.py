"""Anchored ratings from sampled games, for two-player games too large to
traverse (tic-tac-toe, Connect Four) or without exploitability.

    metric = SampledRating('openspiel:tic_tac_toe', make_eval_actor)
    metric.add('main@v0', variables)          # {group: params} per snapshot
    metric.add('main@v200', variables)
    metric.figures()   # {'elo_anchored': ...}

It rates snapshots as `exploitability.Exploitability` does, with played
games in place of exact payoffs: each new snapshot plays
`games_per_opponent` games (seats alternating) against each of up to
`RATED_OPPONENTS` snapshots already rated (the first, the newest and
others evenly spaced between); its mean score against each, scaled to
[0, 1] by the game's payoff range (win 1 / draw 0.5 / loss 0 where the
game does not say), gives its `ratings.performance_rating` against theirs.
The first snapshot is the anchor at `ANCHOR_RATING` and a rating never
changes afterwards, so `elo_anchored` (the newest snapshot's) rises while
newer snapshots beat older ones, with the noise of the games sampled.

A snapshot plays as the pool's tables play it: the weights of an MLP
policy-value network sample from the softmax over the legal moves
(`policy.MLPPolicy`, so two snapshots meet in more than one game even on a
game without chance); any other agent's snapshot is played by its
evaluation actor (`opponents.SnapshotOpponent`).
"""

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import dm_env
import numpy as np

from repertory import environments
from repertory.components.league import exploitability as exploitability_lib
from repertory.components.league import opponents
from repertory.components.league import policy as policy_lib
from repertory.components.league import ratings
from repertory.environments.multiagent import base
from repertory.environments.multiagent import seat as seat_lib

GAMES_PER_OPPONENT = 50


class _MLPPlayer:
  """An MLP policy's sampled legal move on a player's flat view."""

  def __init__(self, weights: Mapping[str, Any], activation: str, seed: int):
    self._weights = weights
    self._policy = policy_lib.MLPPolicy(weights, activation)
    self._rng = np.random.default_rng(seed)

  def new_game(self) -> None:
    pass

  def __call__(self, timestep: dm_env.TimeStep, player: int) -> int:
    view = base.player_view(timestep, player)
    legal = np.asarray(view[base.LEGAL_ACTIONS], np.float32)[None]
    observations = exploitability_lib.network_input(
        self._weights, np.asarray(view[base.OBSERVATION])[None], legal)
    action, _ = self._policy.act(observations, legal, self._rng)
    return int(action[0])


def play(env: Any, first: Any, second: Any, games: int,
         payoff: Optional[tuple] = None) -> float:
  """`first`'s mean score over `games` games of turn-based two-player `env`
  against `second`, seats alternating (`first` in seat 0 in even games).
  Each player is called as (multi-agent timestep, player) -> action and
  told `new_game()` before each game."""
  total = 0.0
  for game in range(games):
    seat = game % 2
    seats = (first, second) if seat == 0 else (second, first)
    for player in seats:
      player.new_game()
    timestep, returns = env.reset(), np.zeros(2)
    while not timestep.last():
      current = int(timestep.observation[base.CURRENT_PLAYER])
      timestep = env.step(seats[current](timestep, current))
      returns += np.asarray(timestep.reward, np.float64)[:2]
    total += opponents.game_score(returns[seat], payoff, returns[1 - seat])
  return total / max(games, 1)


class SampledRating:
  """Rates snapshots from sampled games (see the module docstring).

  Args:
    env: the game's spec ('openspiel:tic_tac_toe'): two players, turns.
    make_eval_actor: the agent's evaluation actor factory (called with a
      variable source), for snapshots that are not MLP policy weights.
    games_per_opponent: games a new snapshot plays against each rated one.
    activation: the hidden activation of MLP policy weights.
    seed: of the games and the sampled moves.
  """

  def __init__(self, env: str, make_eval_actor: Optional[
      Callable[[Any], Any]] = None, games_per_opponent: int = GAMES_PER_OPPONENT,
               activation: str = 'relu', seed: int = 0):
    if games_per_opponent < 2:
      raise ValueError('games_per_opponent must be >= 2 (one in each seat), '
                       f'got {games_per_opponent}.')
    self._env = environments.make(env, seed=seed)
    self._payoff = seat_lib.payoff_range(self._env)
    self._make_eval_actor = make_eval_actor
    self._games = games_per_opponent
    self._activation = activation
    self._seed = seed
    self._snapshots: Dict[str, tuple] = {}  # Id -> (version, variables).
    self._order: List[str] = []
    self._ratings: Dict[str, float] = {}
    self._played = 0

  def _player(self, variables: Mapping[str, Any], version: int) -> Any:
    self._played += 1
    weights = exploitability_lib.mlp_weights(variables)
    if weights is not None:
      return _MLPPlayer(weights, self._activation, self._seed + self._played)
    if self._make_eval_actor is None:
      raise ValueError('These snapshots are not MLP policy weights: playing '
                       'them needs the evaluation actor.')
    return opponents.SnapshotOpponent(self._make_eval_actor, version,
                                      variables, self._seed + self._played)

  def scores(self, variables: Mapping[str, Any], version: int,
             rated: Sequence[str]) -> np.ndarray:
    """Mean scores of a snapshot's `variables` against each of `rated`."""
    player, scores = self._player(variables, version), []
    for snapshot in rated:
      rated_version, rated_variables = self._snapshots[snapshot]
      opponent = self._player(rated_variables, rated_version)
      scores.append(play(self._env, player, opponent, self._games,
                         self._payoff))
    return np.array(scores)

  def rating(self, variables: Mapping[str, Any], version: int = 0) -> float:
    """A snapshot's performance rating against up to `RATED_OPPONENTS`
    rated snapshots of the pool."""
    if not self._order:
      raise ValueError('The pool is empty: add snapshots first.')
    rated = [self._order[i] for i in exploitability_lib.rated_picks(
        len(self._order))]
    return ratings.performance_rating([self._ratings[s] for s in rated],
                                      self.scores(variables, version, rated))

  def add(self, snapshot: str, variables: Mapping[str, Any],
          version: int = 0) -> None:
    """Rates snapshot `snapshot` (once) and adds it to the pool."""
    if snapshot not in self._snapshots:
      self._ratings[snapshot] = (self.rating(variables, version) if self._order
                                 else exploitability_lib.ANCHOR_RATING)
      self._snapshots[snapshot] = (int(version), dict(variables))
      self._order.append(snapshot)

  def keep(self, snapshots: Sequence[str]) -> None:
    """Makes the pool these snapshots (those rated)."""
    keep = set(snapshots)
    self._order = [s for s in self._order if s in keep]
    self._snapshots = {s: self._snapshots[s] for s in self._order}
    self._ratings = {s: self._ratings[s] for s in self._order}

  def figures(self) -> Dict[str, float]:
    """{'elo_anchored': the newest snapshot's rating}."""
    if not self._order:
      raise ValueError('The pool is empty: add snapshots first.')
    return {'elo_anchored': self._ratings[self._order[-1]]}

  def figures_of(self, variables: Mapping[str, Any],
                 version: int = 0) -> Dict[str, float]:
    """The figures of weights outside the pool (the learner's final ones):
    their rating against the pool's."""
    return {'elo_anchored': self.rating(variables, version)}

  def close(self) -> None:
    self._env.close()
