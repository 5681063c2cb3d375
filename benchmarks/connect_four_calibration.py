r"""How strong is OpenSpiel's MCTS bot on Connect Four? Plays it against
fixed players that need no training, as first and as second player.

  python benchmarks/connect_four_calibration.py --games=100 \
      --mcts_simulations=100

Players: `random` (a uniform legal move) and `one_ply` (takes a winning
move when it has one; otherwise avoids every move after which the opponent
can win at once, and picks among the rest weighted towards the centre
column). They place a target of 60 % against MCTS-100 in both seats on a
scale: what a player that only sees one move ahead makes of it.
"""

import json
import time
from typing import Callable, Dict

from absl import app
from absl import flags
import numpy as np
from open_spiel.python.algorithms import mcts
import pyspiel

_GAMES = flags.DEFINE_integer('games', 100, 'Games per seat and player.')
_MCTS = flags.DEFINE_integer('mcts_simulations', 100, 'MCTS simulations.')
_PLAYERS = flags.DEFINE_list('players', ['random', 'one_ply'], 'Players.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of every player.')


def _wins_now(state, action: int, player: int) -> bool:
  child = state.child(action)
  return child.is_terminal() and child.returns()[player] > 0


def one_ply(rng: np.random.RandomState) -> Callable[[pyspiel.State], int]:
  """The one-move-ahead player of the module docstring."""

  def act(state: pyspiel.State) -> int:
    me, legal = state.current_player(), state.legal_actions()
    winning = [a for a in legal if _wins_now(state, a, me)]
    if winning:
      return winning[0]
    safe = []
    for a in legal:
      child = state.child(a)
      if child.is_terminal() or not any(
          _wins_now(child, b, 1 - me) for b in child.legal_actions()):
        safe.append(a)
    choices = safe or legal
    weights = np.array([4.0 - abs(3 - a) for a in choices])
    return int(choices[rng.choice(len(choices), p=weights / weights.sum())])

  return act


def uniform(rng: np.random.RandomState) -> Callable[[pyspiel.State], int]:
  return lambda state: int(rng.choice(state.legal_actions()))


def play(game, player, bot, seat: int, games: int) -> Dict[str, int]:
  """`player` in `seat` against `bot` for `games` games: its W/D/L."""
  counts = {'wins': 0, 'draws': 0, 'losses': 0}
  for _ in range(games):
    state = game.new_initial_state()
    while not state.is_terminal():
      state.apply_action(player(state) if state.current_player() == seat
                         else bot.step(state))
    result = state.returns()[seat]
    counts['wins' if result > 0 else 'losses' if result < 0 else
           'draws'] += 1
  return counts


def main(_):
  game = pyspiel.load_game('connect_four')
  makers = {'random': uniform, 'one_ply': one_ply}
  unknown = [p for p in _PLAYERS.value if p not in makers]
  if unknown:
    raise app.UsageError(f'--players: {unknown} unknown; choose from '
                         f'{sorted(makers)}.')
  rows = []
  for name in _PLAYERS.value:
    for seat in (0, 1):
      bot = mcts.MCTSBot(
          game, 2, _MCTS.value,
          mcts.RandomRolloutEvaluator(1, np.random.RandomState(_SEED.value)),
          random_state=np.random.RandomState(_SEED.value + 1))
      start = time.time()
      counts = play(game, makers[name](np.random.RandomState(_SEED.value)),
                    bot, seat, _GAMES.value)
      rows.append(dict(player=name, seat=('first', 'second')[seat],
                       seconds=round(time.time() - start, 1), **counts))
      print(json.dumps(rows[-1]), flush=True)
  print(f'| player | seat | wins / draws / losses vs MCTS-{_MCTS.value} '
        '| win % |\n|---|---|---|---:|')
  for r in rows:
    print(f"| {r['player']} | {r['seat']} | {r['wins']} / {r['draws']} / "
          f"{r['losses']} | {100 * r['wins'] / _GAMES.value:.1f} |")


if __name__ == '__main__':
  app.run(main)
