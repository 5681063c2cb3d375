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
from typing import Any

import numpy as np

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.seed import acting
from repertory.agents.seed import config as config_lib
from repertory.components import inference
from repertory.components import specs
from repertory.agents.actor_critic import nodes
from repertory.agents.actor_critic import tables

TABLE = tables.TABLE
_POLICY = 'policy'  # actor_critic.networks.POLICY: the learner's variables.


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """Builds SEED's program: replay, counter, learner + servers, monitor,
  environment-only actors.

  Building it imports no TensorFlow (unless `config.use_lstm`: the state
  spec is Sonnet's `LSTMState`): the learner, the policies and the
  evaluation actor are `launch.lazy` references.
  """
  spec = experiment_lib.environment_spec(experiment.env)
  core_state_spec = None
  if config.use_lstm:
    # pylint: disable=g-import-not-at-top
    from repertory.agents.actor_critic import networks as networks_lib
    # pylint: enable=g-import-not-at-top
    core_state_spec = networks_lib.state_spec(config)
  program = launch.Program('seed')
  envs_per_call = config.envs_per_call(experiment.envs_per_actor)
  with program.group('replay'):  # Resume: the queue, like IMPALA's.
    replay = program.add_node(nodes.queue_node(config, spec, experiment,
                                               envs_per_item=envs_per_call))
  counter = experiment_lib.add_counter(program, experiment.logdir)

  learner_node = nodes.learner_node(config, spec, replay, counter, experiment)
  learner = learner_node.create_handle()
  num_servers = config.num_inference_servers
  server_nodes = [
      _server_node(config, spec, experiment, learner, replay, envs_per_call,
                   core_state_spec, s) for s in range(num_servers)]
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
      nodes.eval_actor_factory(config, spec), replay=replay)
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.PyClassNode(
          acting.SeedActor, i, experiment.env, experiment.envs_per_actor,
          experiment.actor_seed(i), servers[i % num_servers],
          batched_env_kind=config.batched_env_kind,
          report_every=config.unroll_length, counter=counter,
          monitor=monitor, transport=config.inference_transport,
          env_groups=config.env_groups))
  return program


def _server_node(config: config_lib.Config, spec: specs.EnvironmentSpec,
                 experiment: experiment_lib.ExperimentConfig, learner: Any,
                 replay: Any, envs_per_call: int, core_state_spec: Any,
                 index: int) -> launch.CourierNode:
  """The `index`-th inference server: an actor's group is its actor."""
  num_actions = specs.num_actions(spec.actions)
  return launch.CourierNode(
      inference.InferenceServer,
      make_policy=functools.partial(
          launch.lazy('repertory.agents.seed.networks:make_policy'),
          config, spec, seed=experiment.seed + index),
      variable_source=learner,
      replay=replay,
      table=TABLE,
      unroll_length=config.unroll_length,
      envs_per_actor=envs_per_call,
      max_batch_size=config.batch_size_for(experiment.num_actors, index),
      batch_timeout_ms=config.batch_timeout_ms,
      variable_update_period=config.variable_update_period,
      variable_name=_POLICY,
      environment_spec=specs.EnvironmentSpec(
          spec.observations, spec.actions, None, None),
      extras_spec={'logits': np.zeros((num_actions,), np.float32)},
      core_state_spec=core_state_spec,
      seed=experiment.seed,
      batched_items=config.batched_items,
      colocated_variable_source=config.inference_placement == 'learner',
      weights_transport=config.weights_transport)
