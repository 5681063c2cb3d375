"""A league snapshot plays as the agent's actors do: its evaluation actor's
move, or with probability `exploration` a uniformly random legal one."""

import numpy as np
import pytest

from repertory import environments
from repertory.components.league import opponents
from repertory.environments.multiagent import base


class _AlwaysFirstActor:
  """An evaluation actor whose policy always plays action 0."""

  def __init__(self, variable_source):
    del variable_source

  def update(self, wait=False):
    del wait

  def observe_first(self, timestep):
    del timestep

  def select_action(self, observation):
    del observation
    return np.int32(0)


def _share_of_other_moves(exploration: float, moves: int = 4000) -> float:
  """The share of a snapshot's moves on Kuhn poker's first decision (two
  legal moves, pass or bet) that are not its policy's pass."""
  game = environments.make('openspiel:kuhn_poker', seed=0)
  opponent = opponents.SnapshotOpponent(_AlwaysFirstActor, 1, {}, seed=3,
                                        exploration=exploration)
  timestep = game.reset()
  player = int(timestep.observation[base.CURRENT_PLAYER])
  assert np.asarray(timestep.observation[base.LEGAL_ACTIONS][player]).sum() == 2
  other = 0
  for _ in range(moves):
    opponent.new_game()
    other += opponent(timestep, player) != 0
  return other / moves


def test_without_exploration_a_snapshot_plays_its_policy():
  assert _share_of_other_moves(0.0) == 0.0


@pytest.mark.parametrize('exploration', [0.1, 0.5])
def test_exploring_snapshot_moves_at_random_as_often_as_the_actors(
    exploration):
  # A uniformly random move among 2 legal ones differs from the policy's
  # half of the time: expected share exploration / 2, binomial sd < 0.008.
  assert _share_of_other_moves(exploration) == pytest.approx(
      exploration / 2, abs=0.03)


def test_actors_exploration_reads_the_agent_config():
  from repertory.agents.neurd import config as neurd_config  # pylint: disable=g-import-not-at-top
  from repertory.agents.impala import config as impala_config  # pylint: disable=g-import-not-at-top
  assert opponents.actors_exploration(neurd_config.Config()) == 0.1
  assert opponents.actors_exploration(impala_config.Config()) == 0.0
