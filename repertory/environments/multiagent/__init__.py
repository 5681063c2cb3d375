"""N-player games: one `MultiAgentEnvironment` interface (see `base.py`),
adapters for OpenSpiel and PettingZoo, reachable by spec through
`repertory.environments.make`:

  openspiel:<game>                  e.g. openspiel:kuhn_poker,
                                    openspiel:leduc_poker(players=3)
  openspiel:<game>/relative         the board from each player's side
                                    (connect_four, tic_tac_toe)
  pettingzoo:<family>.<game>        AEC, e.g. pettingzoo:classic.tictactoe_v3
  pettingzoo:<family>.<game>/parallel   the parallel API

Needs `pip install 'repertory[games]'`.
"""

from typing import Optional

from repertory.environments.multiagent.base import as_actions
from repertory.environments.multiagent.base import CURRENT_PLAYER
from repertory.environments.multiagent.base import LEGAL_ACTIONS
from repertory.environments.multiagent.base import MultiAgentEnvironment
from repertory.environments.multiagent.base import OBSERVATION
from repertory.environments.multiagent.base import player_spec
from repertory.environments.multiagent.base import player_view
from repertory.environments.multiagent.base import PlayerSpec
from repertory.environments.multiagent.base import SIMULTANEOUS
from repertory.environments.multiagent.base import TERMINAL
from repertory.environments.multiagent.versus import RandomOpponent
from repertory.environments.multiagent.versus import VersusEnvironment
from repertory.environments.multiagent.seat import flat_view
from repertory.environments.multiagent.seat import RandomSeat
from repertory.environments.multiagent.seat import SeatEnvironment


def make_openspiel(game: str, seed: Optional[int] = None, **kwargs):
  """`openspiel:<game>[/relative]` (imports OpenSpiel on first use)."""
  from repertory.environments.multiagent import openspiel_adapter  # pylint: disable=g-import-not-at-top
  name, sep, view = game.partition('/')
  if sep:
    if view != 'relative':
      raise ValueError(f"OpenSpiel spec {game!r}: the only suffix is "
                       "'/relative' (the board from each player's side).")
    kwargs['observation'] = 'relative'
  return openspiel_adapter.OpenSpielEnvironment(name, seed=seed, **kwargs)


def make_pettingzoo(name: str, seed: Optional[int] = None, **kwargs):
  """`pettingzoo:<family>.<game>[/parallel]` (imports PettingZoo on use)."""
  from repertory.environments.multiagent import pettingzoo_adapter  # pylint: disable=g-import-not-at-top
  module, sep, api = name.partition('/')
  if sep and api != 'parallel':
    raise ValueError(f"PettingZoo spec {name!r}: the only suffix is "
                     "'/parallel' (the parallel API).")
  return pettingzoo_adapter.PettingZooEnvironment(
      module, seed=seed, api='parallel' if sep else 'aec', **kwargs)

