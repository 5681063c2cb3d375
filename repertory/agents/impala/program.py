"""IMPALA's program graph (Espeholt et al. 2018, figure 1, left): the
actor-critic family's queue-fed graph (`nodes.queue_program`, drawn there)
with its V-trace learner and IMPALA's actors."""

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.actor_critic import nodes
from repertory.agents.actor_critic import tables
from repertory.agents.impala import config as config_lib
from repertory.components import specs

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
  return nodes.queue_program(
      'impala', config, experiment, spec,
      launch.lazy('repertory.agents.impala.acting:ImpalaActor'))
