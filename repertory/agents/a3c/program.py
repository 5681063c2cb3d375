"""The A3C program: a parameter-server learner, counter, monitor, actors.

```
actors --apply_gradients(gradients, v)--> learner (shared optimizer)
   ^                                         |
   +------------ get_variables --------------+
```
No replay: experience never leaves the actor that collected it.
"""

import functools
import os
from typing import Optional

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.a3c import acting
from repertory.agents.a3c import config as config_lib
from repertory.agents.ppo import acting as ppo_acting


def make_learner(config: config_lib.Config, env: str, counter,
                 logdir: Optional[str], checkpoint_dir: Optional[str] = None,
                 snapshot_dir: Optional[str] = None):
  """Builds the learner inside its node (specs come from the environment).

  With `checkpoint_dir` it resumes from its latest checkpoint there.
  """
  from repertory.agents.a3c import learning  # pylint: disable=g-import-not-at-top
  from repertory.agents.a3c import networks as networks_lib  # pylint: disable=g-import-not-at-top
  observation_spec, action_spec = networks_lib.environment_specs(env)
  return learning.A3CLearner(config, observation_spec, action_spec,
                             counter=counter, logdir=logdir,
                             checkpoint_dir=checkpoint_dir,
                             snapshot_dir=snapshot_dir)


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds the A3C program graph (see the module docstring)."""
  if not isinstance(config, config_lib.Config):
    raise TypeError(f'make_program needs an A3C Config, got {config!r}.')
  program = launch.Program('a3c')
  logdir = experiment.logdir
  counter = experiment_lib.add_counter(program, logdir or None)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        make_learner, config, experiment.env, counter,
        os.path.join(logdir, 'learner') if logdir else None,
        checkpoint_dir=os.path.join(logdir, 'checkpoints') if logdir else None,
        snapshot_dir=os.path.join(logdir, 'snapshot') if logdir else None))
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
