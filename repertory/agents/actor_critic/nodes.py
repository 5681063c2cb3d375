"""The nodes the queue-fed actor-critic programs (IMPALA, SEED, NeuRD) share:
the unroll queue, the learner and the evaluation actor's factory, and
`queue_program`, the whole graph IMPALA and NeuRD build. Building them imports
no TensorFlow (learners and actors are `launch.lazy` references, imported in
their own processes).
"""

import functools
import os
from typing import Any, Callable, Dict, Optional

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.actor_critic import tables
from repertory.components import actors
from repertory.components import replay as replay_lib

_LEARNER = launch.lazy('repertory.agents.actor_critic.learning:make_learner')
_EVAL_ACTOR = launch.lazy(
    'repertory.agents.actor_critic.acting:make_eval_actor')


def queue_node(config: Any, spec: Any, experiment: Any,
               envs_per_item: Optional[int] = None) -> launch.ReverbNode:
  """The unroll queue (`tables.make_tables`), checkpointed under
  `<logdir>/replay` every `experiment.checkpoint.replay_every_minutes` (None:
  never), so that a resumed run gets its unrolls back. With
  `config.batched_items` an item holds `envs_per_item` unrolls (default:
  `experiment.envs_per_actor`, an actor's)."""
  return launch.ReverbNode(
      functools.partial(tables.make_tables, config, spec,
                        envs_per_actor=envs_per_item or
                        experiment.envs_per_actor),
      **replay_lib.node_checkpointing(
          os.path.join(experiment.logdir, 'replay'),
          experiment.checkpoint.replay_every_minutes))


def learner_node(config: Any, spec: Any, replay: Any, counter: Any,
                 experiment: Any,
                 make_learner: Callable[..., Any] = _LEARNER
                 ) -> launch.CourierNode:
  """The learner `make_learner(config, spec, replay, TABLE, counter, logdir,
  seed, checkpoint)` (default: the family's V-trace learner) sampling
  `replay`'s queue, with the experiment's logdir, seed and checkpoint
  settings."""
  return launch.CourierNode(
      make_learner, config, spec, replay, tables.TABLE, counter=counter,
      logdir=experiment.logdir, seed=experiment.seed,
      checkpoint=experiment.checkpoint)


def eval_actor_factory(config: Any, spec: Any,
                       make_eval_actor: Callable[..., Any] = _EVAL_ACTOR
                       ) -> Callable[..., Any]:
  """What `experiment.add_monitor` calls to build the evaluation actor
  (`make_eval_actor(config, spec, ...)`, default the family's), in the
  monitor's process."""
  return functools.partial(make_eval_actor, config, spec)


def queue_program(name: str, config: Any, experiment: Any, spec: Any,
                  actor: Callable[..., Any],
                  make_learner: Callable[..., Any] = _LEARNER,
                  make_eval_actor: Callable[..., Any] = _EVAL_ACTOR,
                  metadata: Optional[Dict[str, Any]] = None
                  ) -> launch.Program:
  """IMPALA's graph (Espeholt et al. 2018, figure 1, left):

  ```
   actor/0..N-1 --unrolls--> replay (Reverb queue) --batches--> learner
        ^                                                         |
        +-------------------- weights (VariableClient) <----------+
   counter <-- steps, lag      monitor <-- episodes; evaluates, stops, results
  ```

  `make_learner` builds the learner, `make_eval_actor` the monitor's
  evaluation actor (`metadata` goes into results.json), and each actor node
  holds `actor(i, config, learner, replay, TABLE, counter, monitor, ...)`.
  """
  program = launch.Program(name)
  with program.group('replay'):
    replay = program.add_node(queue_node(config, spec, experiment))
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('learner'):
    learner = program.add_node(learner_node(config, spec, replay, counter,
                                            experiment, make_learner))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      eval_actor_factory(config, spec, make_eval_actor), replay=replay,
      metadata=metadata)
  actors.add_actor_nodes(program, experiment, launch.PyClassNode, actor,
                         config, learner, replay, tables.TABLE,
                         counter=counter, monitor=monitor)
  return program
