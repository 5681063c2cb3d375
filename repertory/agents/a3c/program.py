"""The A3C program: a parameter-server learner, counter, monitor, actors.

```
actors --apply_gradients(gradients, v)--> learner (shared optimizer)
   ^                                         |
   +------------ get_variables --------------+
```
No replay: experience never leaves the actor that collected it.
"""

import functools

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.a3c import acting
from repertory.agents.a3c import config as config_lib
from repertory.agents.ppo import acting as ppo_acting


def make_learner(config: config_lib.Config, env: str, counter, logdir: str):
  """Builds the learner inside its node (specs come from the environment)."""
  from repertory.agents.a3c import learning  # pylint: disable=g-import-not-at-top
  from repertory.agents.a3c import networks as networks_lib  # pylint: disable=g-import-not-at-top
  observation_spec, action_spec = networks_lib.environment_specs(env)
  return learning.A3CLearner(config, observation_spec, action_spec,
                             counter=counter, logdir=logdir)


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds the A3C program graph (see the module docstring)."""
  if not isinstance(config, config_lib.Config):
    raise TypeError(f'make_program needs an A3C Config, got {config!r}.')
  program = launch.Program('a3c')
  counter = experiment_lib.add_counter(program)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        make_learner, config, experiment.env, counter,
        experiment.logdir + '/learner' if experiment.logdir else None))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(ppo_acting.make_eval_actor, env=experiment.env,
                        hidden_sizes=config.hidden_sizes,
                        greedy=config.eval_greedy, seed=experiment.eval_seed))
  with program.group('actor'):
    for actor_id in range(experiment.num_actors):
      program.add_node(launch.CourierNode(
          acting.A3CActor, actor_id, config, experiment.env,
          experiment.envs_per_actor, experiment.actor_seed(actor_id),
          learner, counter, monitor))
  return program
