"""Network policies as OpenSpiel tabular policies: exploitability, and the
average of a pool of policies (what fictitious play converges with).

    game = pyspiel.load_game('kuhn_poker')
    policy = tabular_policy(game, probabilities)   # probabilities(obs, legal)
    exploitability(game, policy)                   # OpenSpiel's, in chips
    average = average_policy(game, [policy_a, policy_b])
    expected_payoffs(game, policy, [policy_a, policy_b])  # exact, both seats

`probabilities(observations [B, *obs], legal [B, A]) -> [B, A]` sees the same
observations as `OpenSpielEnvironment` (the information-state tensor where
the game provides one, else the observation tensor). A recurrent policy (an
LSTM that carries its state across its player's turns) is tabulated by
`recurrent_tabular_policy`, whose `probabilities(observations [T, B, *obs],
legal [B, A])` sees each information state's player's views at all its
turns so far (`player_observations`), the current one last.
"""

import collections
from typing import Callable, List, Optional, Sequence

import numpy as np
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import exploitability as exploitability_lib
import pyspiel

Probabilities = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _observation(game: pyspiel.Game, state: pyspiel.State,
                 player: int) -> np.ndarray:
  if game.get_type().provides_information_state_tensor:
    return np.asarray(state.information_state_tensor(player), np.float32)
  return np.asarray(state.observation_tensor(player), np.float32)


def tabular_policy(game: pyspiel.Game,
                   probabilities: Probabilities) -> policy_lib.TabularPolicy:
  """The tabular policy that plays `probabilities` at every information
  state of `game` (one batched call over all of them)."""
  table = policy_lib.TabularPolicy(game)
  num_actions = game.num_distinct_actions()
  observations, legal = [], []
  for state in table.states:
    player = state.current_player()
    observations.append(_observation(game, state, player))
    mask = np.zeros(num_actions, np.float32)
    mask[state.legal_actions(player)] = 1.0
    legal.append(mask)
  probs = np.asarray(probabilities(np.stack(observations), np.stack(legal)),
                     np.float64)
  probs = probs * np.stack(legal)
  table.action_probability_array[:] = probs / probs.sum(axis=1, keepdims=True)
  return table


def player_observations(game: pyspiel.Game, state: pyspiel.State,
                        player: int) -> List[np.ndarray]:
  """`player`'s observations at each of its turns up to `state` (its view of
  `state` last): what a recurrent policy acting for it has seen there."""
  replay = game.new_initial_state()
  seen = []
  for action in state.history():
    if not replay.is_chance_node() and replay.current_player() == player:
      seen.append(_observation(game, replay, player))
    replay.apply_action(action)
  seen.append(_observation(game, state, player))
  return seen


def recurrent_tabular_policy(game: pyspiel.Game,
                             probabilities: Probabilities
                             ) -> policy_lib.TabularPolicy:
  """The tabular policy of a recurrent policy: at every information state,
  `probabilities(observations [T, B, *obs], legal [B, A])` of its player's
  views at its T turns so far (one call per T). Needs perfect recall (the
  information state fixes the player's past views), as poker games have."""
  table = policy_lib.TabularPolicy(game)
  num_actions = game.num_distinct_actions()
  sequences, legal = [], np.zeros((len(table.states), num_actions),
                                  np.float32)
  by_length = collections.defaultdict(list)
  for k, state in enumerate(table.states):
    player = state.current_player()
    sequences.append(player_observations(game, state, player))
    legal[k, state.legal_actions(player)] = 1.0
    by_length[len(sequences[-1])].append(k)
  probs = np.zeros(legal.shape, np.float64)
  for ks in by_length.values():
    observations = np.stack([np.stack(sequences[k]) for k in ks], axis=1)
    probs[ks] = probabilities(observations, legal[ks])
  probs = probs * legal
  table.action_probability_array[:] = probs / probs.sum(axis=1, keepdims=True)
  return table


def exploitability(game: pyspiel.Game, policy: policy_lib.Policy) -> float:
  """OpenSpiel's exploitability (NashConv / N) of `policy`."""
  return float(exploitability_lib.exploitability(game, policy))


def average_policy(game: pyspiel.Game,
                   policies: Sequence[policy_lib.TabularPolicy],
                   weights: Optional[Sequence[float]] = None
                   ) -> policy_lib.TabularPolicy:
  """The behaviour policy equivalent to picking policy k with probability
  w_k at the start of each game (Heinrich et al. 2015): at information
  state I of player p, Σ_k w_k x_k(I) π_k(I) / Σ_k w_k x_k(I), where x_k(I)
  is p's own probability of reaching I under π_k (perfect recall: the same
  for every history in I)."""
  k = len(policies)
  if k == 0:
    raise ValueError('average_policy needs at least one policy.')
  w = np.full(k, 1.0 / k) if weights is None else np.asarray(weights,
                                                              np.float64)
  if w.shape != (k,) or np.any(w < 0) or w.sum() <= 0:
    raise ValueError(f'weights must be {k} non-negative numbers, got {w}.')
  out = policy_lib.TabularPolicy(game)
  arrays = np.stack([p.action_probability_array for p in policies])  # [K,S,A]
  numerator = np.zeros_like(out.action_probability_array)
  denominator = np.zeros(len(out.states))
  seen = set()
  n = game.num_players()

  def walk(state, reach):  # reach: [N, K] each player's own reach.
    if state.is_terminal():
      return
    if state.is_chance_node():
      for action, _ in state.chance_outcomes():
        walk(state.child(action), reach)
      return
    player = state.current_player()
    index = out.state_lookup[state.information_state_string(player)]
    probs = arrays[:, index]  # [K, A]
    if index not in seen:
      seen.add(index)
      numerator[index] = (w * reach[player]) @ probs
      denominator[index] = (w * reach[player]).sum()
    for action in state.legal_actions():
      child_reach = reach.copy()
      child_reach[player] = reach[player] * probs[:, action]
      walk(state.child(action), child_reach)

  walk(game.new_initial_state(), np.ones((n, k)))
  for index in range(len(out.states)):
    if denominator[index] > 0:
      out.action_probability_array[index] = (numerator[index] /
                                             denominator[index])
    else:  # Reached by no policy: any of theirs (the first) will do.
      out.action_probability_array[index] = arrays[0, index]
  return out


def expected_payoffs(game: pyspiel.Game, policy: policy_lib.TabularPolicy,
                     opponents: Sequence[policy_lib.TabularPolicy]
                     ) -> np.ndarray:
  """`policy`'s exact expected payoff against each of `opponents` in a
  two-player game, the mean of its two seats: `[K]`, one walk of the game
  tree per seat for all K opponents."""
  if game.num_players() != 2:
    raise ValueError(f'expected_payoffs is for two-player games, got '
                     f'{game.num_players()} players.')
  ours = policy.action_probability_array
  theirs = np.stack([p.action_probability_array for p in opponents])  # [K,S,A]
  lookup = policy.state_lookup
  total = np.zeros(len(opponents))

  def walk(state, seat, reach):  # reach: [K] the history's probability.
    if state.is_terminal():
      return reach * state.returns()[seat]
    if state.is_chance_node():
      return sum(walk(state.child(a), seat, reach * p)
                 for a, p in state.chance_outcomes())
    player = state.current_player()
    index = lookup[state.information_state_string(player)]
    value = np.zeros_like(reach)
    for action in state.legal_actions():
      probs = (ours[index, action] if player == seat
               else theirs[:, index, action])
      if np.any(probs > 0):
        value = value + walk(state.child(action), seat, reach * probs)
    return value

  for seat in (0, 1):
    total += walk(game.new_initial_state(), seat, np.ones(len(opponents)))
  return total / 2.0
