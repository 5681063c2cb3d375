"""The R2D2 program: prioritized sequence replay, one learner, N actors
(Kapturowski et al. 2019)."""

import functools
from typing import Any

import numpy as np

from repertory.agents.r2d2 import acting
from repertory.agents.r2d2 import config as config_lib
from repertory.agents.r2d2 import learning
from repertory.agents.r2d2 import networks
from repertory.components import adders
from repertory.agents.prioritized_replay import program as replay_program
from repertory.remote import program as remote_lib

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


_make_local_program = replay_program.program_maker(
    'r2d2', config_lib.Config, make_tables, learning.make_learner,
    acting.R2D2Actor, acting.make_eval_actor, networks.make_network,
    environment_spec=environment_spec)


def make_program(config: config_lib.Config, experiment: Any,
                 remote_options: Any = None) -> Any:
  """Builds the R2D2 program graph; with `--env=remote:<spec>` the remote
  environment service acts instead of the actors (docs/remote.md)."""
  if not remote_lib.is_remote(experiment.env):
    return _make_local_program(config, experiment)
  if not isinstance(config, config_lib.Config):
    raise TypeError(f'make_program of r2d2 needs a {config_lib.__name__}.'
                    f'Config, got {type(config).__name__}.')
  spec = environment_spec(experiment.env)
  add_actors = functools.partial(
      remote_lib.add_sequence_service, logdir=experiment.logdir,
      options=remote_options, make_policy=functools.partial(
          acting.graph_recurrent_policy, functools.partial(
              networks.make_network, spec, config, build=False),
          spec.observations, config.lstm_size),
      oar_spec=spec, config=config, priority_fn=(
          acting.R2D2Priority(config) if config.initial_priority == 'actor'
          else functools.partial(acting.replay_actor.constant_priority,
                                 config.constant_priority)),
      num_epsilons=experiment.num_actors, seed=experiment.seed)
  return replay_program.make_replay_program(
      'r2d2', config, experiment, spec, make_tables, learning.make_learner,
      acting.R2D2Actor, acting.make_eval_actor, networks.make_network,
      add_actors=add_actors)
