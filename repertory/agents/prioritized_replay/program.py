"""The program of prioritized replay agents (Ape-X, R2D2): a Reverb node with
the prioritized table, the counter, one learner, the monitor and N actors
(Horgan et al. 2018, figure 1)."""

import functools
import os
from typing import Any, Callable

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.components import replay as replay_lib

TABLE = 'priority_table'


def prioritized_table(config: Any, signature: Any) -> Any:
  """The prioritized table of `signature` items (FIFO removal,
  SampleToInsertRatio) from a replay agent's config (replay_size,
  priority_exponent, min_replay_size, samples_per_insert,
  samples_per_insert_tolerance, batch_size)."""
  from repertory.components.replay import tables  # pylint: disable=g-import-not-at-top
  return tables.prioritized_replay_table(
      TABLE,
      max_size=config.replay_size,
      priority_exponent=config.priority_exponent,
      signature=signature,
      min_size_to_sample=config.min_replay_size,
      samples_per_insert=config.samples_per_insert,
      error_buffer=tables.error_buffer_for(
          config.samples_per_insert, config.min_replay_size,
          config.samples_per_insert_tolerance, config.batch_size),
      batch_size=config.batch_size)


def make_replay_program(name: str, config: Any,
                        experiment: experiment_lib.ExperimentConfig,
                        spec: Any,
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
    spec: the environment spec (computed once, by the caller).
    make_tables: `make_tables(config, spec)` -> the Reverb tables.
    make_learner: `make_learner(config, spec, replay, TABLE, counter,
      logdir, seed, checkpoint)` -> the learner node's object.
    actor_ctor: `actor_ctor(i, config, experiment, make_network, replay,
      TABLE, learner, counter, monitor)` -> actor i.
    make_eval_actor: `make_eval_actor(spec, config, make_network,
      variable_source, seed)` -> the monitor's evaluation actor.
    make_network: the agent's network builder.
  """
  program = launch.Program(name)
  # Counts continue from <logdir>/counts.json, the learner from its latest
  # checkpoint, when the same logdir is launched again.
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('replay'):  # Restored from <logdir>/replay on a rerun.
    replay = program.add_node(launch.ReverbNode(
        functools.partial(make_tables, config, spec),
        **replay_lib.node_checkpointing(
            os.path.join(experiment.logdir, 'replay'),
            experiment.checkpoint.replay_every_minutes)))
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        make_learner, config, spec, replay, TABLE, counter=counter,
        logdir=experiment.logdir, seed=experiment.seed,
        checkpoint=experiment.checkpoint))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(make_eval_actor, spec, config, make_network,
                        seed=experiment.eval_seed),
      replay=replay)
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.CourierNode(
          actor_ctor, i, config, experiment, make_network, replay, TABLE,
          learner, counter, monitor))
  return program


def program_maker(name: str, config_type: type,
                  make_tables: Callable[[Any, str], Any],
                  make_learner: Callable[..., Any],
                  actor_ctor: Callable[..., Any],
                  make_eval_actor: Callable[..., Any],
                  make_network: Callable[[Any, Any], Any],
                  environment_spec: Callable[[str], Any] = None
                  ) -> Callable[[Any, experiment_lib.ExperimentConfig],
                                launch.Program]:
  """An agent's `make_program(config, experiment)`: checks that `config` is
  a `config_type`, computes the environment spec once
  (`environment_spec(experiment.env)`, default
  `experiment.environment_spec`) and builds `make_replay_program`'s graph."""
  spec_of = environment_spec or experiment_lib.environment_spec

  def make_program(config: Any, experiment: experiment_lib.ExperimentConfig
                   ) -> launch.Program:
    if not isinstance(config, config_type):
      raise TypeError(f'make_program of {name} needs a '
                      f'{config_type.__module__}.Config, got '
                      f'{type(config).__name__}.')
    return make_replay_program(
        name, config, experiment, spec_of(experiment.env), make_tables,
        make_learner, actor_ctor, make_eval_actor, make_network)

  make_program.__doc__ = f'Builds the {name} program graph.'
  return make_program
