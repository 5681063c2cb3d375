"""AlphaZero's self-play actor: every move of both players is chosen by a
search guided by the learner's newest network, and every position is
written with the search's visit distribution and the game's outcome.

    actor = SearchSelfPlayActor('openspiel:connect_four/relative', learner,
                                replay, 'positions', simulations=100)
    actor.run()          # games until the program stops

Per move: `simulations` PUCT simulations from the position
(`network_bot`, Dirichlet(α) noise mixed into the root's priors with
weight ε); the move is drawn in proportion to the root's visit counts for
the first `temperature_moves` moves of a game, afterwards it is the most
visited (or proven) one. When the game ends, each position goes to the
table (`adders.PositionAdder`): the mover's observation and legal moves,
the visit distribution ('search_policy') and the mover's final return
('outcome'), with the version of the weights that played the game. Weights
are fetched before each game (every `variable_update_period`-th), so a game
is played by one version. Each move is one actor step, taken from the
run's exact step budget (`ActorReporter.acquire`); games are counted as
'games'.
"""

from typing import Any, Optional

import numpy as np

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components import adders
from repertory.components import variables
from repertory.components.evaluation import episodes
from repertory.components.league import policy as policy_lib
from repertory.components.search import network_mcts


class SearchSelfPlayActor(core.Worker):
  """Plays games against itself with network-guided search; writes
  positions."""

  def __init__(self, env: Any, learner: Any, replay: Any, table: str,
               simulations: int = 100, uct_c: float = 2.0,
               dirichlet_alpha: float = 1.0, dirichlet_epsilon: float = 0.25,
               temperature_moves: int = 10, variable_update_period: int = 1,
               variable_name: str = 'policy', actor_id: int = 0,
               seed: int = 0, counter: Any = None, monitor: Any = None):
    self._env = environments.make(env, seed=seed)
    if not hasattr(self._env, 'observe'):
      raise ValueError(f'Search self-play plays OpenSpiel games; {env!r} is '
                       'not one.')
    network_mcts.check_game(self._env.game)
    self._game = self._env.game
    self._num_actions = self._game.num_distinct_actions()
    self._simulations, self._uct_c = simulations, uct_c
    self._noise = ((dirichlet_epsilon, dirichlet_alpha)
                   if dirichlet_epsilon > 0 else None)
    self._temperature_moves = temperature_moves
    self._random_state = np.random.RandomState(seed)
    self._client = variables.VariableClient(
        learner, variable_name, update_period=variable_update_period)
    self._adder = adders.PositionAdder(replay, table, actor_id=actor_id)
    self._reporter = episodes.ActorReporter(counter, monitor,
                                            min_interval_s=0.5)
    self._counter = counter
    self._policy: Optional[policy_lib.MLPPolicy] = None
    self._version = -1
    self.games_played = 0
    self._games_to_count = 0

  def _update_policy(self) -> None:
    self._client.update(wait=self._policy is None)
    if self._client.version != self._version:
      self._policy = policy_lib.MLPPolicy(self._client.params)
      self._version = self._client.version

  def play_game(self) -> int:
    """Plays one game and writes its positions; returns how many (0 if
    the run's step budget ran out first: an unfinished game writes none)."""
    self._update_policy()
    # A fresh evaluator per game: its cache holds this version's values.
    bot = network_mcts.network_bot(
        self._game, network_mcts.NetworkEvaluator(self._policy.policy_value,
                                                  self._env.observe),
        self._simulations, self._uct_c, seed=self._random_state,
        dirichlet_noise=self._noise)
    state = self._game.new_initial_state()
    positions = []
    while not state.is_terminal():
      if not self._reporter.acquire(1):  # The run's step budget is spent.
        return 0
      player = state.current_player()
      root = bot.mcts_search(state)
      target = network_mcts.visit_distribution(root, self._num_actions)
      if len(positions) < self._temperature_moves:
        action = int(self._random_state.choice(self._num_actions, p=target))
      else:
        action = int(root.best_child().action)
      legal = np.zeros(self._num_actions, np.float32)
      legal[state.legal_actions(player)] = 1.0
      positions.append((self._env.observe(state, player), legal, target,
                        player))
      state.apply_action(action)
    returns = state.returns()
    self._adder.set_policy_version(self._version)
    for observation, legal, target, player in positions:
      self._adder.add_position({
          'observation': observation, 'legal_actions': legal,
          'search_policy': target,
          'outcome': np.float32(returns[player])})
    self.games_played += 1
    self._games_to_count += 1
    self._reporter.report(len(positions), [], [])
    if self._counter is not None and self._games_to_count >= 16:
      self._counter.futures.increment(games=self._games_to_count)
      self._games_to_count = 0
    return len(positions)

  def run(self, num_games: Optional[int] = None) -> None:
    """Plays until the program stops (or `num_games` games)."""
    stop = launch.stop_event() if num_games is None else None
    try:
      played = 0
      while (stop is None or not stop.is_set()) and (
          num_games is None or played < num_games):
        self.play_game()
        played += 1
    except Exception:  # pylint: disable=broad-except
      if stop is None or not stop.is_set():
        raise  # Reverb or the learner going away while stopping is expected.
    finally:
      self._reporter.flush()
      if num_games is None:
        self.close()

  def close(self) -> None:
    if self._counter is not None and self._games_to_count:
      self._counter.futures.increment(games=self._games_to_count)
      self._games_to_count = 0
    self._reporter.flush()
    self._adder.close()
    self._client.close()
    self._env.close()
