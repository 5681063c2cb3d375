"""NeuRD's program graph: IMPALA's shape with NeuRD's learner, run in a
league (`--league=<rule>`), which seats it in a two-player game against
its own snapshots.

```
 actor/0..N-1 --unrolls of the seat--> replay (Reverb queue) --> learner
      ^  (LeagueSeat: opponent per episode <-- league)              |
      +-------------------- weights (VariableClient) <--------------+
 counter <-- steps, lag        monitor <-- games; evaluates, stops, results
```
"""

import functools

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.actor_critic import nodes
from repertory.agents.actor_critic import tables
from repertory.agents.neurd import config as config_lib
from repertory.components import actors
from repertory.components.league import opponents

TABLE = tables.TABLE


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """replay, counter, learner, monitor, actors; building it imports no
  TensorFlow (the nodes are `launch.lazy` references).

  Raises:
    ValueError: `experiment.env` is not a league's seat (no `--league`).
  """
  if not isinstance(experiment.env, opponents.LeagueGame):
    raise ValueError(
        f'--agent=neurd plays one seat of a two-player game against its own '
        f'snapshots: add --league=<rule> (latest, uniform, pfsp, '
        f'pfsp_variance, alphastar); got --env={experiment.env!r} alone.')
  spec = experiment_lib.environment_spec(experiment.env)
  program = launch.Program('neurd')
  with program.group('replay'):
    replay = program.add_node(nodes.queue_node(config, spec, experiment))
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        launch.lazy('repertory.agents.neurd.learning:make_learner'),
        config, spec, replay, TABLE, counter=counter,
        logdir=experiment.logdir, seed=experiment.seed,
        checkpoint=experiment.checkpoint))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(
          launch.lazy('repertory.agents.neurd.acting:make_eval_actor'),
          config, spec),
      replay=replay, metadata={'policy_loss': config.policy_loss})
  actors.add_actor_nodes(program, experiment, launch.PyClassNode,
                         launch.lazy('repertory.agents.neurd.acting:'
                                     'NeuRDActor'),
                         config, learner, replay, TABLE, counter=counter,
                         monitor=monitor)
  return program
