"""IMPALA's program graph (Espeholt et al. 2018, figure 1, left).

```
 actor/0..N-1 --unrolls--> replay (Reverb queue) --batches--> learner
      ^                                                         |
      +-------------------- weights (VariableClient) <----------+
 counter <-- steps, lag        monitor <-- episodes; evaluates, stops, results
```
"""

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.impala import config as config_lib
from repertory.components import actors
from repertory.components import specs
from repertory.agents.actor_critic import nodes
from repertory.agents.actor_critic import tables

TABLE = tables.TABLE


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds IMPALA's program: replay, counter, learner, monitor, actors.

  Building it imports no TensorFlow: the learner, actors and evaluation
  actor are `launch.lazy` references, imported where they are built.
  """
  spec = experiment_lib.environment_spec(experiment.env)
  specs.num_actions(spec.actions)  # A continuous action fails here.
  program = launch.Program('impala')
  with program.group('replay'):
    replay = program.add_node(nodes.queue_node(config, spec, experiment))
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('learner'):
    learner = program.add_node(
        nodes.learner_node(config, spec, replay, counter, experiment))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      nodes.eval_actor_factory(config, spec), replay=replay)
  actors.add_actor_nodes(program, experiment, launch.PyClassNode,
                         launch.lazy('repertory.agents.impala.acting:'
                                     'ImpalaActor'),
                         config, learner, replay, TABLE, counter=counter,
                         monitor=monitor)
  return program
