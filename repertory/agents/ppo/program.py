"""The synchronous PPO program: queue, learner, counter, monitor, actors.

```
actors --unrolls of version v--> queue --one round--> learner
   ^                                                     |
   +------ wait_for_version(v + 1), get_variables <------+
```

Building the graph imports no TensorFlow: the learner, actors and policies
are named by `launch.lazy` references, imported in the processes that build
them (the launcher and the run monitor never do).
"""

import dataclasses
import functools

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.ppo import config as config_lib
from repertory.components import actors
from repertory.components import config_checks

# The unroll queue's table name (`acting.QUEUE`; the driver imports no actor).
QUEUE = 'queue'
_NUMPY_POLICY = 'repertory.agents.actor_critic.numpy_policy'


def make_tables(config: config_lib.Config, spec, num_actors: int,
                envs_per_actor: int):
  """The unroll queue; it holds two rounds, so actors never block on it."""
  # pylint: disable=g-import-not-at-top
  from repertory.agents.ppo import acting
  from repertory.components import adders
  from repertory.components import replay
  # pylint: enable=g-import-not-at-top
  signature = adders.unroll_signature(
      adders.EnvironmentSpec(spec.observations, spec.actions, None, None),
      config.unroll_length, acting.extras_spec(),
      envs_per_item=envs_per_actor if config.batched_items else None)
  items = config.queue_items_per_round(num_actors, envs_per_actor)
  return [replay.queue_table(QUEUE, max_size=2 * items,
                             signature=signature)]


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds the synchronous PPO program graph (see the module docstring)."""
  config_checks.require(config, config_lib.Config, 'PPO')
  program = launch.Program('ppo')
  spec = experiment_lib.environment_spec(experiment.env)
  num_actors, envs_per_actor = (experiment.num_actors,
                                experiment.envs_per_actor)
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(functools.partial(
        make_tables, config, spec, num_actors, envs_per_actor)))
  counter = experiment_lib.add_counter(program, experiment.logdir or None)
  # The run takes whole rounds (SB3's loop): the monitor stops it after the
  # last one, so every actor's last round is counted in the results.
  steps_per_round = config.steps_per_round(num_actors, envs_per_actor)
  max_rounds = config_lib.rounds_for_budget(experiment.max_actor_steps,
                                            steps_per_round)
  in_rounds = dataclasses.replace(
      experiment, max_actor_steps=max_rounds * steps_per_round)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        launch.lazy('repertory.agents.ppo.learning:make_learner'), config,
        spec, replay, QUEUE,
        num_actors, envs_per_actor, counter=counter,
        logdir=experiment.logdir or None,
        anneal_steps=experiment.max_actor_steps, seed=experiment.seed,
        checkpoint=experiment.checkpoint))
  monitor = experiment_lib.add_monitor(
      program, in_rounds, counter, learner,
      functools.partial(launch.lazy(f'{_NUMPY_POLICY}:EvalActor'),
                        greedy=config.eval_greedy, seed=experiment.eval_seed),
      replay=replay)
  actors.add_actor_nodes(program, experiment, launch.CourierNode,
                         launch.lazy('repertory.agents.ppo.acting:PPOActor'),
                         config, replay, learner, counter, monitor,
                         max_rounds=max_rounds)
  return program
