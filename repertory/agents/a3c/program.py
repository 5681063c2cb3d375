"""The A3C program: a parameter-server learner, counter, monitor, actors.

```
actors --update(gradients, v, actor_id)--> learner (shared optimizer)
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
from repertory.agents.a3c import learning
from repertory.components import actors
from repertory.components import config_checks
from repertory.agents.actor_critic import numpy_policy


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds the A3C program graph (see the module docstring)."""
  config_checks.require(config, config_lib.Config, 'A3C')
  spec = experiment_lib.environment_spec(experiment.env)
  program = launch.Program('a3c')
  counter = experiment_lib.add_counter(program, experiment.logdir or None)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        learning.make_learner, config, spec, counter=counter,
        logdir=experiment.logdir or None, seed=experiment.seed,
        checkpoint=experiment.checkpoint))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(numpy_policy.EvalActor,
                        greedy=config.eval_greedy, seed=experiment.eval_seed))
  actors.add_actor_nodes(program, experiment, launch.CourierNode,
                         acting.A3CActor, config, learner, counter, monitor)
  return program
