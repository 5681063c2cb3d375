"""OpenSpiel games as `MultiAgentEnvironment`s (`openspiel:<game>`).

    env = OpenSpielEnvironment('kuhn_poker', seed=0)
    env = OpenSpielEnvironment('leduc_poker(players=3)')   # game parameters

Sequential and simultaneous games with or without chance are supported;
chance outcomes are sampled by the environment. Each player observes its
information-state tensor where the game provides one (imperfect
information: Kuhn, Leduc), else its observation tensor (Connect Four).
Illegal actions are refused with the legal ones named.

`openspiel:connect_four/relative` (and `tic_tac_toe/relative`) gives each
player the board from its own side, as AlphaZero's inputs do: OpenSpiel's
tensor for these games is the same for both players, one plane per player's
pieces; with 'relative' the first of those two planes holds the observing
player's pieces, the second its opponent's, so one network plays both
seats with the same features.
"""

import difflib
from typing import Optional

import dm_env
import numpy as np
import pyspiel

from repertory.environments.multiagent import base

_SUPPORTED_DYNAMICS = (pyspiel.GameType.Dynamics.SEQUENTIAL,
                       pyspiel.GameType.Dynamics.SIMULTANEOUS)
OBSERVATIONS = ('auto', 'info_state', 'observation', 'relative')
# Board games whose observation tensor holds each player's pieces in a plane
# of its own: (player 0's plane, player 1's plane) ('relative' views).
PLAYER_PLANES = {'connect_four': (0, 1), 'tic_tac_toe': (2, 1)}


def _first_line(error: Exception) -> str:
  return str(error).strip().splitlines()[0]


def load_game(name: str) -> pyspiel.Game:
  """`pyspiel.load_game(name)`, refusing unknown and unsupported games with
  one line that names the choices."""
  short = name.split('(', 1)[0]
  registered = pyspiel.registered_names()
  if short not in registered:
    close = difflib.get_close_matches(short, registered, n=5)
    hint = (f'did you mean {", ".join(close)}? ' if close else '')
    raise ValueError(f'OpenSpiel has no game {short!r}: {hint}(all games: '
                     'pyspiel.registered_names()).')
  try:
    game = pyspiel.load_game(name)
  except pyspiel.SpielError as e:
    raise ValueError(f'OpenSpiel game {name!r}: {_first_line(e)}.') from None
  kind = game.get_type()
  if kind.dynamics not in _SUPPORTED_DYNAMICS:
    raise ValueError(
        f'OpenSpiel game {name!r} has {kind.dynamics.name} dynamics; '
        'supported: sequential and simultaneous games.')
  if not (kind.provides_information_state_tensor or
          kind.provides_observation_tensor):
    raise ValueError(f'OpenSpiel game {name!r} provides neither an '
                     'information-state nor an observation tensor.')
  if game.num_players() < 1:
    raise ValueError(f'OpenSpiel game {name!r} has no players.')
  return game


class OpenSpielEnvironment(base.MultiAgentEnvironment):
  """One OpenSpiel game, played from its initial state at every reset."""

  def __init__(self, game: str, seed: Optional[int] = None,
               observation: str = 'auto'):
    """Loads `game` (a name with optional parameters, or a pyspiel.Game).

    Args:
      game: e.g. 'kuhn_poker', 'connect_four', 'leduc_poker(players=3)'.
      seed: seed of the chance-outcome sampler.
      observation: 'info_state', 'observation', 'relative' (the observation
        tensor from the observing player's side; games in PLAYER_PLANES) or
        'auto' (info state where the game provides one).
    """
    if observation not in OBSERVATIONS:
      raise ValueError(f'observation={observation!r}: choose one of '
                       f'{", ".join(OBSERVATIONS)}.')
    self._game = game if isinstance(game, pyspiel.Game) else load_game(game)
    kind = self._game.get_type()
    self._planes = None
    if observation == 'relative':
      self._planes = PLAYER_PLANES.get(kind.short_name)
      if self._planes is None:
        raise ValueError(
            f'OpenSpiel game {kind.short_name!r} has no relative view; games '
            f'with one: {", ".join(sorted(PLAYER_PLANES))}.')
      observation = 'observation'
    if observation == 'auto':
      observation = ('info_state' if kind.provides_information_state_tensor
                     else 'observation')
    if observation == 'info_state':
      if not kind.provides_information_state_tensor:
        raise ValueError(f'{self._game} provides no information-state tensor.')
      self._shape = tuple(self._game.information_state_tensor_shape())
      self._tensor = lambda s, p: s.information_state_tensor(p)
    else:
      self._shape = tuple(self._game.observation_tensor_shape())
      self._tensor = lambda s, p: s.observation_tensor(p)
    self._n = self._game.num_players()
    self._a = self._game.num_distinct_actions()
    self._simultaneous = (kind.dynamics ==
                          pyspiel.GameType.Dynamics.SIMULTANEOUS)
    self._rng = np.random.default_rng(seed)
    self._state = None

  @property
  def game(self) -> pyspiel.Game:
    return self._game

  @property
  def state(self) -> pyspiel.State:
    """The OpenSpiel state now (at a player node or terminal)."""
    return self._state

  @property
  def num_players(self) -> int:
    return self._n

  @property
  def simultaneous(self) -> bool:
    return self._simultaneous

  @property
  def num_actions(self) -> int:
    return self._a

  def player_observation_shape(self) -> tuple:
    return self._shape

  def observe(self, state: pyspiel.State, player: int) -> np.ndarray:
    """`player`'s observation of `state` (any state of this game, e.g. one
    a search reached), as the environment gives it."""
    obs = np.reshape(np.asarray(self._tensor(state, player), np.float32),
                     self._shape)
    if self._planes is not None and player == 1:  # The two planes swapped.
      obs[list(self._planes)] = obs[list(self._planes[::-1])]
    return obs

  def _resolve_chance(self, rewards: np.ndarray) -> None:
    while self._state.is_chance_node():
      outcomes, probs = zip(*self._state.chance_outcomes())
      self._state.apply_action(
          int(outcomes[self._rng.choice(len(outcomes), p=probs)]))
      rewards += self._state.rewards()

  def _timestep(self, step_type, rewards) -> dm_env.TimeStep:
    state, n = self._state, self._n
    obs = np.stack([self.observe(state, p) for p in range(n)])
    legal = np.zeros((n, self._a), np.float32)
    if state.is_terminal():
      player = base.TERMINAL
    elif state.is_simultaneous_node():
      player = base.SIMULTANEOUS
      for p in range(n):
        legal[p, state.legal_actions(p)] = 1.0
    else:
      player = state.current_player()
      legal[player, state.legal_actions(player)] = 1.0
    observation = {base.OBSERVATION: obs, base.LEGAL_ACTIONS: legal,
                   base.CURRENT_PLAYER: np.int32(player)}
    discount = np.full(n, 0.0 if state.is_terminal() else 1.0, np.float32)
    if step_type == dm_env.StepType.FIRST:
      return dm_env.TimeStep(step_type, None, None, observation)
    return dm_env.TimeStep(step_type, rewards.astype(np.float32), discount,
                           observation)

  def reset(self) -> dm_env.TimeStep:
    self._state = self._game.new_initial_state()
    self._resolve_chance(np.zeros(self._n))
    return self._timestep(dm_env.StepType.FIRST, None)

  def step(self, actions) -> dm_env.TimeStep:
    if self._state is None or self._state.is_terminal():
      return self.reset()
    state = self._state
    player = (base.SIMULTANEOUS if state.is_simultaneous_node()
              else state.current_player())
    actions = base.as_actions(actions, self._n, player)
    acting = range(self._n) if player == base.SIMULTANEOUS else [player]
    for p in acting:
      legal = state.legal_actions(p)
      if legal and int(actions[p]) not in legal:
        raise ValueError(f'{self._game}: action {int(actions[p])} of player '
                         f'{p} is illegal here; legal actions: {legal}.')
    rewards = np.zeros(self._n)
    if player == base.SIMULTANEOUS:
      state.apply_actions([int(a) for a in actions])
    else:
      state.apply_action(int(actions[player]))
    rewards += state.rewards()
    self._resolve_chance(rewards)
    step_type = (dm_env.StepType.LAST if state.is_terminal()
                 else dm_env.StepType.MID)
    return self._timestep(step_type, rewards)
