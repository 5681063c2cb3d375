"""The synchronous PPO program: queue, learner, counter, monitor, actors.

```
actors --unrolls of version v--> queue --one round--> learner
   ^                                                     |
   +------ wait_for_version(v + 1), get_variables <------+
```
"""

import functools
import os
from typing import Optional

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.ppo import acting
from repertory.agents.ppo import config as config_lib


def make_tables(config: config_lib.Config, env: str, num_actors: int,
                envs_per_actor: int):
  """The unroll queue; it holds two rounds, so actors never block on it."""
  from repertory.agents.ppo import networks as networks_lib  # pylint: disable=g-import-not-at-top
  from repertory.components import adders  # pylint: disable=g-import-not-at-top
  from repertory.components import replay  # pylint: disable=g-import-not-at-top
  observation_spec, action_spec = networks_lib.environment_specs(env)
  signature = adders.unroll_signature(
      adders.EnvironmentSpec(observation_spec, action_spec, None, None),
      config.unroll_length, acting.extras_spec())
  items = config.items_per_round(num_actors, envs_per_actor)
  return [replay.queue_table(acting.QUEUE, max_size=2 * items,
                             signature=signature)]


def make_learner(config: config_lib.Config, env: str, replay, num_actors: int,
                 envs_per_actor: int, counter, logdir: Optional[str],
                 anneal_steps: int, checkpoint_dir: Optional[str] = None,
                 snapshot_dir: Optional[str] = None):
  """Builds the learner inside its node (specs come from the environment).

  With `checkpoint_dir` it resumes from its latest checkpoint there.
  """
  from repertory.agents.ppo import learning  # pylint: disable=g-import-not-at-top
  from repertory.agents.ppo import networks as networks_lib  # pylint: disable=g-import-not-at-top
  observation_spec, action_spec = networks_lib.environment_specs(env)
  return learning.PPOLearner(
      config, observation_spec, action_spec, replay, acting.QUEUE,
      num_actors=num_actors, envs_per_actor=envs_per_actor, counter=counter,
      logdir=logdir, anneal_steps=anneal_steps, checkpoint_dir=checkpoint_dir,
      snapshot_dir=snapshot_dir)


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds the synchronous PPO program graph (see the module docstring)."""
  if not isinstance(config, config_lib.Config):
    raise TypeError(f'make_program needs a PPO Config, got {config!r}.')
  program = launch.Program('ppo')
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(functools.partial(
        make_tables, config, experiment.env, experiment.num_actors,
        experiment.envs_per_actor)))
  logdir = experiment.logdir
  counter = experiment_lib.add_counter(program, logdir or None)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        make_learner, config, experiment.env, replay, experiment.num_actors,
        experiment.envs_per_actor, counter,
        os.path.join(logdir, 'learner') if logdir else None,
        experiment.max_actor_steps,
        checkpoint_dir=os.path.join(logdir, 'checkpoints') if logdir else None,
        snapshot_dir=os.path.join(logdir, 'snapshot') if logdir else None))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(acting.make_eval_actor, env=experiment.env,
                        hidden_sizes=config.hidden_sizes,
                        greedy=config.eval_greedy, seed=experiment.eval_seed),
      replay=replay)
  with program.group('actor'):
    for actor_id in range(experiment.num_actors):
      program.add_node(launch.CourierNode(
          acting.PPOActor, actor_id, config, experiment.env,
          experiment.envs_per_actor, experiment.actor_seed(actor_id), replay,
          learner, counter, monitor))
  return program
