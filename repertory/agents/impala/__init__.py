"""IMPALA (Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with
Importance Weighted Actor-Learner Architectures", arXiv:1802.01561).

  from repertory.agents import impala
  program = impala.make_program(impala.Config(), experiment)
"""

from repertory.agents.impala.config import Config


def make_program(config, experiment):
  """Builds IMPALA's program graph; see `program.make_program`."""
  from repertory.agents.impala import program  # pylint: disable=g-import-not-at-top
  return program.make_program(config, experiment)
