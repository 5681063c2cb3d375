"""The Ape-X program: prioritized replay, one learner, N actors (Horgan et al.
2018, figure 1)."""

import functools
import os
from typing import Any, Callable, Optional

import numpy as np

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.apex import acting
from repertory.agents.apex import config as config_lib
from repertory.agents.apex import learning
from repertory.agents.apex import networks
from repertory.components import adders
from repertory.components import replay as replay_lib
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


def make_replay_program(name: str, config: Any,
                        experiment: experiment_lib.ExperimentConfig,
                        make_tables: Callable[[Any, str], Any],
                        make_learner: Callable[..., Any],
                        actor_ctor: Callable[..., Any],
                        make_eval_actor: Callable[..., Any],
                        make_network: Callable[[Any, Any], Any]
                        ) -> launch.Program:
  """The replay-style program both Ape-X and R2D2 build: a Reverb node with
  the prioritized table, the counter, one learner, the monitor and N actors
  (Horgan et al. 2018, figure 1).

  Args:
    name: the program's name.
    config: the agent's Config.
    experiment: the run's settings.
    make_tables: `make_tables(config, env)` -> the Reverb tables.
    make_learner: `make_learner(config, env, replay, counter, logdir,
      checkpoint_dir)` -> the learner.
    actor_ctor: `actor_ctor(i, config, experiment, make_network, replay,
      TABLE, learner, counter, monitor)` -> actor i.
    make_eval_actor: `make_eval_actor(env, config, make_network,
      variable_source)` -> the monitor's evaluation actor.
    make_network: the agent's network builder.
  """
  program = launch.Program(name)
  # Counts continue from <logdir>/counts.json, the learner from its latest
  # checkpoint, when the same logdir is launched again.
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('replay'):  # Restored from <logdir>/replay on a rerun.
    replay = program.add_node(launch.ReverbNode(
        functools.partial(make_tables, config, experiment.env),
        **replay_lib.node_checkpointing(
            os.path.join(experiment.logdir, 'replay'),
            config.replay_checkpoint_minutes)))
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        make_learner, config, experiment.env, replay, counter,
        os.path.join(experiment.logdir, 'learner'),
        os.path.join(experiment.logdir, 'checkpoints')))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(make_eval_actor, experiment.env, config,
                        make_network),
      replay=replay)
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.CourierNode(
          actor_ctor, i, config, experiment, make_network, replay, TABLE,
          learner, counter, monitor))
  return program


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds the Ape-X program graph."""
  if not isinstance(config, config_lib.Config):
    raise TypeError(f'make_program needs an apex.Config, got '
                    f'{type(config).__name__}.')
  return make_replay_program('apex', config, experiment, make_tables,
                             make_learner, acting.ApexActor,
                             acting.make_eval_actor, networks.make_network)
