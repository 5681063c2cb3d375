"""The `--league*` flags of `repertory.run` (read only there): self-play as a
league around the agent's own program (docs/selfplay.md)."""

import functools
from typing import Any, Callable

from absl import flags

_LEAGUE = flags.DEFINE_enum(
    'league', None, ['latest', 'uniform', 'pfsp', 'pfsp_variance',
                     'alphastar'],
    "Self-play: --agent's own program in a league on a two-player game "
    '(--env=openspiel:<game>), opponents per episode by this matchmaking '
    'rule (docs/selfplay.md).')
_LEAGUE_SNAPSHOT_EVERY = flags.DEFINE_integer(
    'league_snapshot_every', None,
    "With --league: freeze the learner's weights into the pool each time "
    'its version moved this many versions past the newest snapshot (unset: '
    "the rule's default, docs/selfplay.md).", lower_bound=1)
_LEAGUE_EXPLOITABILITY = flags.DEFINE_bool(
    'league_exploitability', None,
    'With --league: report the exploitability of the newest snapshot and of '
    "the pool's average policy as the run goes (OpenSpiel's, for small "
    'two-player zero-sum games such as kuhn_poker and leduc_poker). Unset: '
    'wherever the game allows it; set: refuse a game that does not.')
_LEAGUE_RATED_GAMES = flags.DEFINE_integer(
    'league_rated_games', 50,
    'With --league, on a game without exploitability (too large to '
    'traverse, such as tic_tac_toe) or with --noleague_exploitability: each '
    'new snapshot plays this many '
    'games against each of up to 8 rated snapshots for its anchored Elo '
    '(elo_anchored); 0: not rated.', lower_bound=0)
_LEAGUE_EXPLOITERS = flags.DEFINE_integer(
    'league_exploiters', 0,
    "With --league: add this many main exploiters (AlphaStar's): each the "
    "agent's learner again, with its own queue or replay and actors, "
    "learning to beat main's newest snapshot; its snapshots join the pool "
    'and it restarts when its generation ends (docs/selfplay.md).')
_LEAGUE_EXPLOITER_WIN_RATE = flags.DEFINE_float(
    'league_exploiter_win_rate', 0.7,
    "With --league_exploiters: an exploiter's generation ends once its mean "
    'score against main since its restart reaches this (after '
    '--league_exploiter_min_games games)...')
_LEAGUE_EXPLOITER_RESET_STEPS = flags.DEFINE_integer(
    'league_exploiter_reset_steps', None,
    '...or after this many of its learner steps (unset: by win rate only).')
_LEAGUE_EXPLOITER_MIN_GAMES = flags.DEFINE_integer(
    'league_exploiter_min_games', 100,
    "Games against main before an exploiter's win rate can end its "
    'generation.')

# Every flag of this module; all but --league mean something only with it.
NAMES = ('league', 'league_snapshot_every', 'league_exploitability',
         'league_rated_games',
         'league_exploiters', 'league_exploiter_win_rate',
         'league_exploiter_reset_steps', 'league_exploiter_min_games')


def in_league(make_program: Callable[..., Any]) -> Callable[..., Any]:
  """`make_program` in the league the flags ask for (itself without
  --league).

  Raises:
    ValueError: a league flag given without --league.
  """
  if not _LEAGUE.value:
    given = [f'--{name}' for name in NAMES[1:] if flags.FLAGS[name].present]
    if given:
      raise ValueError(f'{", ".join(given)} need --league=<rule>.')
    return make_program
  from repertory.components import league  # pylint: disable=g-import-not-at-top
  return functools.partial(
      league.make_program, make_program, matchmaking=_LEAGUE.value,
      snapshot_every_versions=_LEAGUE_SNAPSHOT_EVERY.value,
      exploitability=_LEAGUE_EXPLOITABILITY.value,
      rated_games=_LEAGUE_RATED_GAMES.value,
      exploiters=_LEAGUE_EXPLOITERS.value,
      exploiter_win_rate=_LEAGUE_EXPLOITER_WIN_RATE.value,
      exploiter_reset_steps=_LEAGUE_EXPLOITER_RESET_STEPS.value,
      exploiter_min_games=_LEAGUE_EXPLOITER_MIN_GAMES.value)
