"""The Ape-X program: prioritized replay, one learner, N actors (Horgan et al.
2018, figure 1)."""

import functools
import os
from typing import Any, Optional

import numpy as np

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.apex import acting
from repertory.agents.apex import config as config_lib
from repertory.agents.apex import learning
from repertory.agents.apex import networks
from repertory.components import adders
from repertory.components.replay import tables

TABLE = 'priority_table'


def make_tables(config: config_lib.Config, env: str):
  """The prioritized transition table (FIFO removal, SampleToInsertRatio)."""
  spec = learning.environment_spec(env)
  signature = adders.NStepTransitionAdder.signature(
      spec, extras_spec={'q_taken': np.zeros((), np.float32)})
  return [tables.prioritized_replay_table(
      TABLE,
      max_size=config.replay_size,
      priority_exponent=config.priority_exponent,
      signature=signature,
      min_size_to_sample=config.min_replay_size,
      samples_per_insert=config.samples_per_insert,
      error_buffer=tables.error_buffer_for(
          config.samples_per_insert, config.min_replay_size,
          config.samples_per_insert_tolerance, config.batch_size),
      batch_size=config.batch_size)]


def make_learner(config: config_lib.Config, env: str, replay: Any,
                 counter: Any = None, logdir: str = '',
                 checkpoint_dir: Optional[str] = None) -> learning.ApexLearner:
  return learning.ApexLearner(config, learning.environment_spec(env),
                              networks.make_network, replay, TABLE,
                              counter=counter, logdir=logdir,
                              checkpoint_dir=checkpoint_dir)


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds the Ape-X program graph."""
  if not isinstance(config, config_lib.Config):
    raise TypeError(f'make_program needs an apex.Config, got '
                    f'{type(config).__name__}.')
  program = launch.Program('apex')
  # Counts continue from <logdir>/counts.json, the learner from its latest
  # checkpoint, when the same logdir is launched again.
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(
        functools.partial(make_tables, config, experiment.env)))
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        make_learner, config, experiment.env, replay, counter,
        os.path.join(experiment.logdir, 'learner'),
        os.path.join(experiment.logdir, 'checkpoints')))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(acting.make_eval_actor, experiment.env, config,
                        networks.make_network),
      replay=replay)
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.CourierNode(
          acting.ApexActor, i, config, experiment, networks.make_network,
          replay, TABLE, learner, counter, monitor))
  return program
