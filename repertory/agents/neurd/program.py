"""NeuRD's program graph: IMPALA's (`nodes.queue_program`) with NeuRD's
learner, run in a league (`--league=<rule>`): each actor's `LeagueSeat`
takes an opponent from the league per episode and the actor plays the other
seat, so the queue holds unrolls of that seat and the monitor counts games.
"""

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.actor_critic import nodes
from repertory.agents.actor_critic import tables
from repertory.agents.neurd import config as config_lib
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
  return nodes.queue_program(
      'neurd', config, experiment, spec,
      launch.lazy('repertory.agents.neurd.acting:NeuRDActor'),
      make_learner=launch.lazy('repertory.agents.neurd.learning:make_learner'),
      make_eval_actor=launch.lazy(
          'repertory.agents.neurd.acting:make_eval_actor'),
      metadata={'policy_loss': config.policy_loss})
