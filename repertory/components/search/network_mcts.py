"""Tree search guided by a policy-value network (AlphaZero's PUCT search),
on OpenSpiel's own `MCTSBot`.

    evaluator = NetworkEvaluator(policy_value, observe)
    bot = network_bot(game, evaluator, simulations=100)
    action = bot.step(state)
    # Self-play (AlphaZero): noise at the root, the visits as the target.
    bot = network_bot(game, evaluator, 100, dirichlet_noise=(0.25, 1.0))
    target = visit_distribution(bot.mcts_search(state), num_actions)

`policy_value(observations [B, *obs], legal [B, A])` returns the player to
move's legal-action probabilities `[B, A]` and its expected return `[B]`
(for the selfplay network, `league.MLPPolicy.policy_value`: π and Σ π Q);
`observe(state, player)` is that player's observation as the network saw it
in training (`OpenSpielEnvironment.observe`). Each new leaf gets the
network's value in place of a random rollout, and its children the
network's probabilities as PUCT priors:

    U(s, a) = Q(s, a) + c · P(s, a) · sqrt(N(s)) / (1 + N(s, a))

Terminal leaves keep the game's exact returns (and with `solve`, proven
wins and losses back up, MCTS-Solver). Two-player zero-sum games: the value
of the player to move is v, its opponent's -v.
"""

import collections
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
from open_spiel.python.algorithms import mcts
import pyspiel

PolicyValue = Callable[[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]
Observe = Callable[[pyspiel.State, int], np.ndarray]
_CACHE_SIZE = 100_000  # Leaves remembered (a leaf is valued, later expanded).


class NetworkEvaluator(mcts.Evaluator):
  """Leaf values and priors from a policy-value network, one network call
  per distinct position (the search asks for a leaf's value when it reaches
  it and for its priors when it expands it)."""

  def __init__(self, policy_value: PolicyValue, observe: Observe):
    self._policy_value, self._observe = policy_value, observe
    self._cache: 'collections.OrderedDict[str, Tuple[Any, float]]' = (
        collections.OrderedDict())

  def _evaluate(self, state: pyspiel.State) -> Tuple[np.ndarray, float]:
    key = state.history_str()
    hit = self._cache.get(key)
    if hit is not None:
      return hit
    player = state.current_player()
    legal = np.zeros(state.num_distinct_actions(), np.float32)
    legal[state.legal_actions(player)] = 1.0
    probs, value = self._policy_value(self._observe(state, player)[None],
                                      legal[None])
    hit = (probs[0], float(value[0]))
    self._cache[key] = hit
    if len(self._cache) > _CACHE_SIZE:
      self._cache.popitem(last=False)
    return hit

  def evaluate(self, state: pyspiel.State) -> np.ndarray:
    """Both players' values: v for the player to move, -v for the other."""
    value = self._evaluate(state)[1]
    values = np.full(2, -value)
    values[state.current_player()] = value
    return values

  def prior(self, state: pyspiel.State) -> List[Tuple[int, float]]:
    """(action, network probability) for each legal action."""
    probs = self._evaluate(state)[0]
    return [(a, float(probs[a]))
            for a in state.legal_actions(state.current_player())]


def check_game(game: pyspiel.Game) -> None:
  """Refuses games the search cannot value (not two-player zero-sum
  deterministic turn-based games with perfect information)."""
  kind = game.get_type()
  if (game.num_players() != 2 or
      kind.utility != pyspiel.GameType.Utility.ZERO_SUM or
      kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL or
      kind.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC or
      kind.information != pyspiel.GameType.Information.PERFECT_INFORMATION):
    raise ValueError(
        f'Network search plays two-player zero-sum turn-based games with '
        f'perfect information and no chance (connect_four, tic_tac_toe, '
        f'...); {kind.short_name!r} is not one.')


def network_bot(game: pyspiel.Game, evaluator: NetworkEvaluator,
                simulations: int, uct_c: float = 2.0, seed: Any = 0,
                solve: bool = True,
                dirichlet_noise: Optional[Tuple[float, float]] = None
                ) -> mcts.MCTSBot:
  """OpenSpiel's MCTS bot with PUCT selection over `evaluator`'s priors; it
  plays the most visited move. `dirichlet_noise` = (ε, α) mixes
  Dirichlet(α) noise into the root's priors with weight ε (AlphaZero's
  self-play exploration); None: none. `seed`: an int or a
  `np.random.RandomState` (tie-breaking, noise)."""
  check_game(game)
  if simulations < 1:
    raise ValueError(f'simulations must be >= 1, got {simulations}.')
  random_state = (seed if isinstance(seed, np.random.RandomState)
                  else np.random.RandomState(seed))
  return mcts.MCTSBot(game, uct_c, int(simulations), evaluator, solve=solve,
                      random_state=random_state,
                      child_selection_fn=mcts.SearchNode.puct_value,
                      dirichlet_noise=dirichlet_noise)


def visit_distribution(root: mcts.SearchNode, num_actions: int
                       ) -> np.ndarray:
  """The root's visit counts as a distribution over the actions `[A]`
  (AlphaZero's policy target; 0 for moves never visited). A root the solver
  proved (the search stops there) puts all of it on the move it proved
  best: its visits then say little."""
  visits = np.zeros(num_actions, np.float32)
  if root.outcome is not None:
    visits[root.best_child().action] = 1.0
    return visits
  for child in root.children:
    visits[child.action] = child.explore_count
  return visits / visits.sum()
