"""Self-play against a league of past selves: naive self-play (`latest`),
fictitious self-play (`uniform`) and AlphaStar's prioritized fictitious
self-play (`pfsp`), on N-player games (`openspiel:`, `pettingzoo:` specs).

  python -m repertory.run --agent=selfplay --env=openspiel:kuhn_poker \
      --config.matchmaking=pfsp

IMPALA, SEED, PPO or any other agent play in a league of their own
snapshots with `--league=<rule>` (`repertory.components.league.program`):

  python -m repertory.run --agent=impala --env=openspiel:kuhn_poker --league=pfsp
"""

from repertory.agents.selfplay.config import Config


def make_program(config, experiment):
  """Builds the self-play program graph; see `program.make_program`."""
  from repertory.agents.selfplay import program  # pylint: disable=g-import-not-at-top
  return program.make_program(config, experiment)
