"""AlphaZero (Silver et al. 2018): self-play in which a search guided by the
network picks every move, and the network learns the search's move
distribution and the games' outcomes from a replay of positions.

  python -m repertory.run --agent=alphazero \
      --env=openspiel:connect_four/relative --config.simulations=100
"""

from repertory.agents.alphazero.config import Config


def make_program(config, experiment):
  """Builds the AlphaZero program graph; see `program.make_program`."""
  from repertory.agents.alphazero import program  # pylint: disable=g-import-not-at-top
  return program.make_program(config, experiment)
