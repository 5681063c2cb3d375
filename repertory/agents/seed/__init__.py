"""SEED RL (Espeholt et al. 2020, "SEED RL: Scalable and Efficient Deep-RL
with Accelerated Central Inference", arXiv:1910.06591): environment-only
actors, a central batched inference server, IMPALA's V-trace learner.

Importing this package (or `seed.acting`) does not import TensorFlow, so
that SEED's actor processes stay free of it.
"""

from repertory.agents.seed.config import Config


def make_program(config, experiment, **kwargs):
  """Builds SEED's program graph; see `program.make_program`."""
  from repertory.agents.seed import program  # pylint: disable=g-import-not-at-top
  return program.make_program(config, experiment, **kwargs)
