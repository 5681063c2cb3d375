"""Anchored ratings from sampled games on tic-tac-toe (too large to
traverse): games scored against a plain tic-tac-toe written from its rules,
ratings against Elo's formula solved by scipy, MLP snapshots sampled from
their softmax, and the league node reporting the rating."""


import numpy as np
import pytest

from repertory import core
from repertory.components import league
from repertory.components.league import sampled_rating
from repertory.environments.multiagent import base

TIC_TAC_TOE = 'openspiel:tic_tac_toe'
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8),
         (0, 4, 8), (2, 4, 6))
# Deterministic rules: the order in which each tries the free cells.
RULES = {'first': tuple(range(9)), 'last': tuple(range(8, -1, -1)),
         'center': (4, 0, 2, 6, 8, 1, 3, 5, 7)}


def _plain_game(x_rule, o_rule):
  """X's result (1 win, 0 draw, -1 loss) when X plays `x_rule` and O
  plays `o_rule`, from tic-tac-toe's rules."""
  board = [None] * 9
  for turn in range(9):
    mark, rule = ('x', x_rule) if turn % 2 == 0 else ('o', o_rule)
    board[next(c for c in RULES[rule] if board[c] is None)] = mark
    if any(all(board[c] == mark for c in line) for line in LINES):
      return 1 if mark == 'x' else -1
  return 0


def _plain_score(a, b):
  """a's mean score over one game in each seat, a win 1, draw 0.5, loss 0."""
  return ((_plain_game(a, b) + 1) / 2 + (1 - _plain_game(b, a)) / 2) / 2


class _RuleActor(core.Actor):
  """Plays the rule its snapshot names (variable group 'rule') on a seat's
  flat view (the observation, then the legal mask of 9)."""

  def __init__(self, source):
    self._source = source
    self._order = None

  def update(self, wait=False):
    _, [group] = self._source.get_variables(['rule'])
    self._order = RULES[str(group['name'])]

  def select_action(self, observation):
    legal = np.asarray(observation)[-9:]
    return next(c for c in self._order if legal[c])

  def observe_first(self, timestep):
    pass

  def observe(self, action, next_timestep):
    pass


def _rule(name):
  return {'rule': {'name': name}}


def test_play_scores_games_as_the_rules_do():
  metric = sampled_rating.SampledRating(TIC_TAC_TOE, _RuleActor,
                                        games_per_opponent=2)
  for a in RULES:
    for b in RULES:
      assert metric.scores(_rule(a), 0, []).size == 0
      metric.add('b', _rule(b))
      [score] = metric.scores(_rule(a), 0, ['b'])
      assert score == pytest.approx(_plain_score(a, b)), (a, b)
      metric.keep([])
  metric.close()


def test_ratings_are_anchored_at_the_first_and_never_change():
  from scipy import optimize  # pylint: disable=g-import-not-at-top
  metric = sampled_rating.SampledRating(TIC_TAC_TOE, _RuleActor,
                                        games_per_opponent=4)
  ratings = []
  for k, name in enumerate(('first', 'center', 'last')):
    metric.add(f'p{k}', _rule(name))
    ratings.append(metric.figures()['elo_anchored'])
  assert ratings[0] == 1000.0
  # 'center' wins both games against 'first': a perfect score sits 800
  # beyond the opponent.
  assert _plain_score('center', 'first') == 1.0
  assert ratings[1] == 1800.0
  # 'last' draws 'first' on average and beats 'center' in both seats.
  scores = [_plain_score('last', 'first'), _plain_score('last', 'center')]
  assert scores == [0.5, 1.0]
  balance = lambda r: sum(1 / (1 + 10 ** ((o - r) / 400))
                          for o in ratings[:2]) - sum(scores)
  assert ratings[2] == pytest.approx(optimize.brentq(balance, 0, 3000),
                                     abs=1e-6)
  assert metric.figures() == {'elo_anchored': ratings[2]}
  # Weights outside the pool are rated against it without joining it.
  assert metric.figures_of(_rule('first'))['elo_anchored'] < ratings[1]
  assert metric.figures()['elo_anchored'] == ratings[2]
  metric.close()


def _mlp_weights(preferred, size=9):
  """MLP policy weights whose logits favour cell `preferred` by 20."""
  bias = np.zeros(size, np.float32)
  bias[preferred] = 20.0
  inputs = 27 + 9  # tic-tac-toe's observation, then the legal mask.
  return {'policy': {'torso/mlp/layers/0/w': np.zeros((inputs, 4), np.float32),
                     'torso/mlp/layers/0/b': np.zeros(4, np.float32),
                     'head/policy/w': np.zeros((4, size), np.float32),
                     'head/policy/b': bias}}


def test_mlp_snapshots_sample_their_softmax_over_legal_moves():
  metric = sampled_rating.SampledRating(TIC_TAC_TOE, None)
  player = metric._player(_mlp_weights(4), 0)  # pylint: disable=protected-access
  env = metric._env  # pylint: disable=protected-access
  timestep = env.reset()
  assert player(timestep, 0) == 4
  timestep = env.step(4)  # Cell 4 taken: uniform over the other eight.
  moves = {player(timestep, 1) for _ in range(200)}
  assert 4 not in moves and len(moves) == 8
  assert int(timestep.observation[base.CURRENT_PLAYER]) == 1
  with pytest.raises(ValueError, match='at least|>= 2'):
    sampled_rating.SampledRating(TIC_TAC_TOE, None, games_per_opponent=1)
  metric.close()


def test_league_node_reports_the_sampled_rating(mlp_league_node):
  node, publish = mlp_league_node(TIC_TAC_TOE, rating_game=TIC_TAC_TOE,
                                  rated_games=4)
  assert node.evaluation_metrics() == {}
  assert node.measure() == {'elo_anchored': 1000.0, 'elo_anchored_version': 0}
  publish()
  assert node.snapshot() == 'main@v1'
  second = node.measure()
  assert second['elo_anchored_version'] == 1
  assert 200.0 <= second['elo_anchored'] <= 1800.0
  assert node.evaluation_metrics() == second
  publish()
  final = node.evaluation_metrics(final=True)
  assert final['elo_anchored_version'] == 2
  assert set(final) == {'elo_anchored', 'elo_anchored_version'}
