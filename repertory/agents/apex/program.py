"""The Ape-X program: prioritized replay, one learner, N actors (Horgan et al.
2018, figure 1)."""

from typing import Any

import numpy as np

from repertory.agents.apex import acting
from repertory.agents.apex import config as config_lib
from repertory.agents.apex import learning
from repertory.agents.apex import networks
from repertory.components import adders
from repertory.agents.prioritized_replay import program as replay_program

TABLE = replay_program.TABLE


def make_tables(config: config_lib.Config, spec: Any):
  """The prioritized transition table (FIFO removal, SampleToInsertRatio)."""
  signature = adders.NStepTransitionAdder.signature(
      spec, extras_spec={'q_taken': np.zeros((), np.float32)})
  return [replay_program.prioritized_table(config, signature)]


make_program = replay_program.program_maker(
    'apex', config_lib.Config, make_tables, learning.make_learner,
    acting.ApexActor, acting.make_eval_actor, networks.make_network)
