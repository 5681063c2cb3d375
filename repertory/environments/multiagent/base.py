"""The N-player interface: one dm_env for every player at once.

A `MultiAgentEnvironment` is a `dm_env.Environment` whose timesteps carry
every player's view, stacked on a leading player axis `[N]`:

  observation = {
      'observation':    [N, *obs]  float32, player p's own view (its
                        information state in imperfect-information games),
      'legal_actions':  [N, A]     float32, 1 where player p may act now
                        (all zeros for a player who does not act),
      'current_player': ()         int32, the player to act, or
                        SIMULTANEOUS (-2) when all act, TERMINAL (-4) at LAST,
  }
  reward   = [N] float32, each player's reward since the previous timestep,
  discount = [N] float32, 0 for every player at the end of a game.

`step(actions)` takes `[N]` int actions (turn-based games read only the
current player's entry; a plain int is accepted for them). Chance nodes are
resolved inside the environment with its own random generator, so a
timestep always waits on players.

    env = multiagent.make('openspiel:kuhn_poker', seed=0)
    timestep = env.reset()
    while not timestep.last():
      p = int(timestep.observation['current_player'])
      legal = np.flatnonzero(timestep.observation['legal_actions'][p])
      timestep = env.step(int(rng.choice(legal)))

`player_spec(env)` gives ONE player's observation spec (no player axis):
what a per-player network, adder and table signature are built from.
"""

import abc
from typing import Any, Dict, NamedTuple

import dm_env
from dm_env import specs
import numpy as np

SIMULTANEOUS = -2
TERMINAL = -4

OBSERVATION = 'observation'
LEGAL_ACTIONS = 'legal_actions'
CURRENT_PLAYER = 'current_player'


class MultiAgentEnvironment(dm_env.Environment, abc.ABC):
  """A dm_env.Environment for N players (see the module docstring)."""

  @property
  @abc.abstractmethod
  def num_players(self) -> int:
    """N."""

  @property
  @abc.abstractmethod
  def simultaneous(self) -> bool:
    """True if all players act at each step (`current_player` is -2)."""

  @property
  @abc.abstractmethod
  def num_actions(self) -> int:
    """A: the size of every player's discrete action set."""

  @abc.abstractmethod
  def player_observation_shape(self) -> tuple:
    """The shape of one player's observation."""

  def observation_spec(self) -> Dict[str, specs.Array]:
    n, a = self.num_players, self.num_actions
    return {
        OBSERVATION: specs.Array((n,) + tuple(self.player_observation_shape()),
                                 np.float32, OBSERVATION),
        LEGAL_ACTIONS: specs.BoundedArray((n, a), np.float32, 0.0, 1.0,
                                          LEGAL_ACTIONS),
        CURRENT_PLAYER: specs.Array((), np.int32, CURRENT_PLAYER),
    }

  def action_spec(self) -> specs.DiscreteArray:
    """One player's action (step takes `[N]` of them)."""
    return specs.DiscreteArray(self.num_actions, np.int32, name='action')

  def reward_spec(self) -> specs.Array:
    return specs.Array((self.num_players,), np.float32, 'reward')

  def discount_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray((self.num_players,), np.float32, 0.0, 1.0,
                              'discount')


class PlayerSpec(NamedTuple):
  """ONE player's specs (an `adders.EnvironmentSpec`-compatible tuple)."""
  observations: Any
  actions: Any
  rewards: Any
  discounts: Any


def player_spec(env: MultiAgentEnvironment) -> PlayerSpec:
  """One player's observation ({'observation', 'legal_actions'}), action,
  scalar reward and discount specs."""
  spec = env.observation_spec()
  return PlayerSpec(
      observations={
          OBSERVATION: specs.Array(spec[OBSERVATION].shape[1:], np.float32,
                                   OBSERVATION),
          LEGAL_ACTIONS: specs.BoundedArray(spec[LEGAL_ACTIONS].shape[1:],
                                            np.float32, 0.0, 1.0,
                                            LEGAL_ACTIONS),
      },
      actions=env.action_spec(),
      rewards=specs.Array((), np.float32, 'reward'),
      discounts=specs.BoundedArray((), np.float32, 0.0, 1.0, 'discount'))


def player_view(timestep: dm_env.TimeStep, player: int) -> Dict[str, Any]:
  """Player `player`'s observation from a multi-agent timestep."""
  obs = timestep.observation
  return {OBSERVATION: obs[OBSERVATION][player],
          LEGAL_ACTIONS: obs[LEGAL_ACTIONS][player]}


def as_actions(actions: Any, num_players: int, player: int) -> np.ndarray:
  """`[N]` int actions from a plain int (turn-based) or an `[N]` array."""
  actions = np.asarray(actions)
  if actions.ndim == 0:
    if player < 0:
      raise ValueError(
          f'A simultaneous step needs {num_players} actions (one per player), '
          f'got the single action {int(actions)}.')
    full = np.zeros(num_players, np.int64)
    full[player] = actions
    return full
  if actions.shape != (num_players,):
    raise ValueError(f'Expected {num_players} actions (one per player), got '
                     f'shape {actions.shape}.')
  return actions.astype(np.int64)
