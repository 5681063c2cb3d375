"""`search.NetworkEvaluator` and `network_bot`: the network's priors and
values reach OpenSpiel's search, with the right players' signs."""

import numpy as np
from open_spiel.python.algorithms import minimax
import pyspiel
import pytest

from repertory import environments
from repertory.components import search


def _play(game, actions):
  state = game.new_initial_state()
  for action in actions:
    state.apply_action(action)
  return state


def test_priors_are_the_softmax_of_the_legal_logits():
  env = environments.make('openspiel:connect_four/relative')
  state = _play(env.game, [3, 3, 3, 3, 3, 3, 0])  # Column 3 full; O moves.
  logits = np.arange(7, dtype=np.float32) / 3.0
  calls = []

  def policy_value(observations, legal):
    calls.append((observations, legal))
    z = np.where(legal > 0, logits, -np.inf)
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True), np.array([0.25])

  evaluator = search.NetworkEvaluator(policy_value, env.observe)
  prior = dict(evaluator.prior(state))
  legal = [0, 1, 2, 4, 5, 6]
  assert sorted(prior) == legal
  expected = np.exp(logits[legal]) / np.exp(logits[legal]).sum()
  np.testing.assert_allclose([prior[a] for a in legal], expected, rtol=1e-6)
  # O (player 1) is to move: the value is its own, X's the negation.
  np.testing.assert_allclose(evaluator.evaluate(state), [-0.25, 0.25])
  assert len(calls) == 1  # The position's priors and value: one call.
  observation, legal_mask = calls[0]
  np.testing.assert_array_equal(observation[0], env.observe(state, 1))
  np.testing.assert_array_equal(legal_mask[0], [1, 1, 1, 0, 1, 1, 1])


def test_search_with_exact_values_plays_the_only_winning_move():
  game = pyspiel.load_game('tic_tac_toe')
  # X in a corner, O on an adjacent edge: X to move wins only by
  # moves that are not immediate wins, so the values must lead the search.
  state = _play(game, [0, 1])
  values = {}
  for action in state.legal_actions():
    child = state.clone()
    child.apply_action(action)
    values[action] = minimax.alpha_beta_search(
        game, state=child, maximizing_player_id=0)[0]
  winning = [a for a, v in values.items() if v == 1]
  assert winning and len(winning) < len(values)

  def observe(state_, player):  # The exact value of the player to move.
    return np.array([minimax.alpha_beta_search(
        game, state=state_, maximizing_player_id=player)[0]], np.float32)

  def policy_value(observations, legal):
    return legal / legal.sum(-1, keepdims=True), observations[:, 0]

  bot = search.network_bot(game, search.NetworkEvaluator(policy_value,
                                                         observe),
                           simulations=60, solve=False)
  assert bot.step(state) in winning


def test_refuses_games_it_cannot_value():
  for name in ('kuhn_poker', 'goofspiel'):
    with pytest.raises(ValueError, match='two-player zero-sum turn-based '
                       'games with perfect information'):
      search.check_game(pyspiel.load_game(name))
  with pytest.raises(ValueError, match='simulations must be >= 1, got 0'):
    search.network_bot(pyspiel.load_game('tic_tac_toe'),
                       search.NetworkEvaluator(None, None), 0)


def test_a_proven_root_puts_the_target_on_the_proven_move():
  game = pyspiel.load_game('tic_tac_toe')
  state = _play(game, [0, 3, 1, 4])  # X wins at once with 2.

  def policy_value(observations, legal):
    return legal / legal.sum(-1, keepdims=True), np.zeros(len(legal))

  bot = search.network_bot(game, search.NetworkEvaluator(
      policy_value, lambda s, p: np.zeros(1, np.float32)), simulations=50)
  root = bot.mcts_search(state)
  assert root.outcome is not None  # Solved before 50 simulations.
  target = search.visit_distribution(root, 9)
  np.testing.assert_array_equal(target, np.eye(9)[2])
  # An unsolved root: the visit counts, normalised.
  root = search.network_bot(game, search.NetworkEvaluator(
      policy_value, lambda s, p: np.zeros(1, np.float32)),
                            simulations=30, solve=False).mcts_search(state)
  visits = np.zeros(9)
  for child in root.children:
    visits[child.action] = child.explore_count
  np.testing.assert_allclose(search.visit_distribution(root, 9),
                             visits / visits.sum(), rtol=1e-6)
