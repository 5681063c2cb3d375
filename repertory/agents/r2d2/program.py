"""The R2D2 program: prioritized sequence replay, one learner, N actors
(Kapturowski et al. 2019)."""

from typing import Any

import numpy as np

from repertory.agents.r2d2 import acting
from repertory.agents.r2d2 import config as config_lib
from repertory.agents.r2d2 import learning
from repertory.agents.r2d2 import networks
from repertory.components import adders
from repertory.agents.prioritized_replay import program as replay_program

TABLE = replay_program.TABLE


def environment_spec(env: str) -> adders.EnvironmentSpec:
  """The spec of the actors' (OAR-wrapped) environment."""
  environment = acting.make_environment(env, seed=0)
  try:
    return adders.make_environment_spec(environment)
  finally:
    environment.close()


def make_tables(config: config_lib.Config, spec: Any):
  """The prioritized sequence table (FIFO removal, SampleToInsertRatio)."""
  num_actions = int(spec.actions.num_values)
  signature = adders.SequenceAdder.signature(
      spec, config.sequence_length,
      extras_spec={'q_values': np.zeros((num_actions,), np.float32)},
      core_state_spec={
          'hidden': np.zeros((config.lstm_size,), np.float32),
          'cell': np.zeros((config.lstm_size,), np.float32)},
      end_of_episode_behavior=adders.EndBehavior.CONTINUE)
  return [replay_program.prioritized_table(config, signature)]


make_program = replay_program.program_maker(
    'r2d2', config_lib.Config, make_tables, learning.make_learner,
    acting.R2D2Actor, acting.make_eval_actor, networks.make_network,
    environment_spec=environment_spec)
