"""NeuRD (Hennes et al. 2020, "Neural Replicator Dynamics"), MMD (Sokota et
al. 2022) and A2C with an action-value critic, learned in self-play: the
agent plays one seat of a two-player game in a league of its own snapshots.

  python -m repertory.run --agent=neurd --env=openspiel:kuhn_poker \
      --league=latest --max_actor_steps=600000    # MMD, a moving magnet
"""

from repertory.agents.neurd.config import Config


def make_program(config, experiment):
  """Builds NeuRD's program graph; see `program.make_program`."""
  from repertory.agents.neurd import program  # pylint: disable=g-import-not-at-top
  return program.make_program(config, experiment)
