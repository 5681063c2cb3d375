"""SEED RL's program graph (Espeholt et al. 2020, arXiv:1910.06591, figure 2).

```
 actor/0..N-1 (environments only)
      | observations (one call per batched step)  ^ actions
      v                                           |
 learner process: inference server(s) --unrolls--> replay (Reverb queue)
                  V-trace learner  <--batches--------+
                  (the servers pull weights from the learner)
 counter <-- steps, lag        monitor <-- episodes; evaluates, stops, results
```

With `inference_placement='learner'` (default) the servers are threads of
the learner's process (a `MultiThreadingColocation`, group 'learner');
'separate' gives them their own processes (group 'inference').
"""

import functools
import os

import numpy as np

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.impala import acting as impala_acting
from repertory.agents.impala import program as impala_program
from repertory.agents.seed import acting
from repertory.agents.seed import config as config_lib
from repertory.agents.seed import networks as networks_lib
from repertory.components import inference
from repertory.remote import program as remote_lib

TABLE = impala_program.TABLE


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig,
                 remote_options=None) -> launch.Program:
  """Builds SEED's program: replay, counter, learner + servers, monitor,
  environment-only actors."""
  from repertory.agents.seed import learning  # pylint: disable=g-import-not-at-top
  from repertory.components import adders  # pylint: disable=g-import-not-at-top
  from repertory.components import replay as replay_lib  # pylint: disable=g-import-not-at-top
  observation_spec, action_spec = networks_lib.environment_specs(
      experiment.env)
  num_actions = networks_lib.num_actions(action_spec)
  program = launch.Program('seed')
  with program.group('replay'):  # Resume: the queue, like IMPALA's.
    replay = program.add_node(launch.ReverbNode(
        functools.partial(impala_program.make_tables, config,
                          observation_spec, action_spec),
        **replay_lib.node_checkpointing(
            os.path.join(experiment.logdir, 'replay'),
            config.replay_checkpoint_minutes)))
  counter = experiment_lib.add_counter(program, experiment.logdir)

  learner_node = launch.CourierNode(
      learning.VTraceLearner, config, observation_spec, action_spec, replay,
      TABLE, counter=counter, logdir=os.path.join(experiment.logdir, 'learner'),
      seed=experiment.seed,
      checkpoint_dir=os.path.join(experiment.logdir, 'checkpoints'),
      snapshot_dir=os.path.join(experiment.logdir, 'snapshot'))
  learner = learner_node.create_handle()
  remote = remote_lib.is_remote(experiment.env)  # Remote clients act instead.
  num_servers = 0 if remote else config.num_inference_servers
  actors_per_server = [len(range(s, experiment.num_actors, num_servers))
                       for s in range(num_servers)]
  server_nodes = [
      launch.CourierNode(
          inference.InferenceServer,
          make_policy=functools.partial(networks_lib.make_policy, config,
                                        observation_spec, action_spec,
                                        seed=experiment.seed + s),
          variable_source=learner,
          replay=replay,
          table=TABLE,
          unroll_length=config.unroll_length,
          envs_per_actor=experiment.envs_per_actor,
          max_batch_size=config.batch_size_for(max(actors_per_server[s], 1)),
          batch_timeout_ms=config.batch_timeout_ms,
          variable_update_period=config.variable_update_period,
          variable_name=networks_lib.POLICY,
          environment_spec=adders.EnvironmentSpec(observation_spec,
                                                  action_spec, None, None),
          extras_spec={'logits': np.zeros((num_actions,), np.float32)},
          core_state_spec=networks_lib.state_spec(config))
      for s in range(num_servers)]
  if config.inference_placement == 'learner':
    with program.group('learner'):
      handles = program.add_node(
          launch.MultiThreadingColocation([learner_node] + server_nodes))
    servers = handles[1:]
  else:
    with program.group('learner'):
      program.add_node(learner_node)
    with program.group('inference'):
      servers = [program.add_node(node) for node in server_nodes]

  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(impala_acting.make_eval_actor, config, experiment.env),
      replay=replay)
  if remote:  # The remote environment service replaces servers and actors.
    remote_lib.add_service(
        program, experiment.logdir, remote_options, functools.partial(
            networks_lib.make_policy, config, observation_spec, action_spec,
            seed=experiment.seed), learner, replay, TABLE, observation_spec,
        action_spec, config.unroll_length, config.variable_update_period,
        {'logits': np.zeros((num_actions,), np.float32)},
        networks_lib.state_spec(config), counter, monitor, experiment.seed)
    return program
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.PyClassNode(
          acting.SeedActor, i, experiment.env, experiment.envs_per_actor,
          experiment.actor_seed(i), servers[i % num_servers],
          batched_env_kind=config.batched_env_kind,
          report_every=config.unroll_length, counter=counter,
          monitor=monitor, transport=config.inference_transport))
  return program
