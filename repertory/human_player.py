"""A person at the terminal as a player of `repertory.play`
(`--players=human,run:<logdir>`): each turn shows the game and the legal
moves, and reads the move typed (its number or its name)."""

import sys
from typing import Any, Callable, List, Optional

QUIT = ('q', 'quit', 'exit')


class HumanPlayer:
  """Plays the moves a person types.

  Args:
    read: reads one line (default: `input`); end of input stops the games.
    write: shows one line (default: `print` to stdout).
  """

  def __init__(self, read: Optional[Callable[[str], str]] = None,
               write: Optional[Callable[[str], None]] = None):
    self._read = read or input
    self._write = write or (lambda line: print(line, flush=True))
    self._games = 0

  def new_game(self) -> None:
    self._games += 1
    self._write(f'--- game {self._games} ---')

  def __call__(self, env: Any, timestep: Any, player: int) -> int:
    legal = [int(a) for a in
             (timestep.observation['legal_actions'][player]).nonzero()[0]]
    names = [_action_name(env, player, a) for a in legal]
    self._write(_describe(env, timestep, player))
    self._write('Your moves: ' + ', '.join(
        f'{a}={name}' for a, name in zip(legal, names)))
    while True:
      try:
        text = self._read(f'player {player}, your move: ').strip()
      except EOFError:
        sys.exit('repertory.play: stopped (end of input).')
      if text.lower() in QUIT:
        sys.exit('repertory.play: stopped.')
      move = _parse(text, legal, names)
      if move is not None:
        return move
      self._write(f'{text!r} is not a legal move; type one of '
                  f'{", ".join(map(str, legal))} (or its name), q to quit.')


def _parse(text: str, legal: List[int], names: List[str]) -> Optional[int]:
  if text.lstrip('-').isdigit() and int(text) in legal:
    return int(text)
  for action, name in zip(legal, names):
    if text.lower() == name.lower():
      return action
  return None


def _action_name(env: Any, player: int, action: int) -> str:
  state = getattr(env, 'state', None)
  if state is not None and hasattr(state, 'action_to_string'):
    return str(state.action_to_string(player, action))
  return str(action)


def _describe(env: Any, timestep: Any, player: int) -> str:
  """The game as this player may see it: OpenSpiel's information state
  string when the game has one, else the state, else the observation."""
  state = getattr(env, 'state', None)
  if state is not None:
    for method in ('information_state_string', 'observation_string'):
      try:
        return f'You are player {player}.\n{getattr(state, method)(player)}'
      except Exception:  # pylint: disable=broad-except
        continue  # The game does not provide this kind of string.
    return f'You are player {player}.\n{state}'
  return (f'You are player {player}; observation:\n'
          f'{timestep.observation["observation"][player]}')
