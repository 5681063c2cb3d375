"""IMPALA's program graph (Espeholt et al. 2018, figure 1, left).

```
 actor/0..N-1 --unrolls--> replay (Reverb queue) --batches--> learner
      ^                                                         |
      +-------------------- weights (VariableClient) <----------+
 counter <-- steps, lag        monitor <-- episodes; evaluates, stops, results
```
"""

import functools
import os
from typing import Any, List

import numpy as np

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.impala import acting
from repertory.agents.impala import config as config_lib
from repertory.agents.impala import networks as networks_lib

TABLE = 'queue'


def unroll_signature(config: config_lib.Config, observation_spec: Any,
                     action_spec: Any) -> Any:
  """The signature of the queue's items (one environment's unroll)."""
  from repertory.components import adders  # pylint: disable=g-import-not-at-top
  num_actions = networks_lib.num_actions(action_spec)
  return adders.unroll_signature(
      adders.EnvironmentSpec(observation_spec, action_spec, None, None),
      config.unroll_length,
      extras_spec={'logits': np.zeros((num_actions,), np.float32)},
      core_state_spec=networks_lib.state_spec(config))


def make_tables(config: config_lib.Config, observation_spec: Any,
                action_spec: Any, table: str = TABLE) -> List[Any]:
  """The unroll queue: each unroll is consumed once; actors block when full.

  With `config.train` off nothing samples, so the table drops its oldest
  unrolls instead of blocking the actors (acting throughput measurements).
  """
  import reverb  # pylint: disable=g-import-not-at-top
  from repertory.components import replay  # pylint: disable=g-import-not-at-top
  signature = unroll_signature(config, observation_spec, action_spec)
  if config.train:
    return [replay.queue_table(table, config.max_queue_size,
                               signature=signature,
                               batch_size=config.batch_size)]
  return [reverb.Table(
      name=table, sampler=reverb.selectors.Fifo(),
      remover=reverb.selectors.Fifo(), max_size=config.max_queue_size,
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)]


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds IMPALA's program: replay, counter, learner, monitor, actors."""
  from repertory.agents.impala import learning  # pylint: disable=g-import-not-at-top
  from repertory.components import replay as replay_lib  # pylint: disable=g-import-not-at-top
  observation_spec, action_spec = networks_lib.environment_specs(
      experiment.env)
  networks_lib.num_actions(action_spec)  # A continuous action fails here.
  program = launch.Program('impala')
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(
        functools.partial(make_tables, config, observation_spec,
                          action_spec),
        **replay_lib.node_checkpointing(
            os.path.join(experiment.logdir, 'replay'),
            config.replay_checkpoint_minutes)))
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        learning.VTraceLearner, config, observation_spec, action_spec,
        replay, TABLE, counter=counter,
        logdir=os.path.join(experiment.logdir, 'learner'),
        seed=experiment.seed,
        checkpoint_dir=os.path.join(experiment.logdir, 'checkpoints'),
        snapshot_dir=os.path.join(experiment.logdir, 'snapshot')))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(acting.make_eval_actor, config, experiment.env),
      replay=replay)
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.PyClassNode(
          acting.ImpalaActor, i, config, experiment.env,
          experiment.envs_per_actor, experiment.actor_seed(i), learner,
          replay, TABLE, counter=counter, monitor=monitor))
  return program
