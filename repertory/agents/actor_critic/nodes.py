"""The nodes of IMPALA's and SEED's program graphs that are the same in
both: the unroll queue, the V-trace learner and the evaluation actor's
factory. Building them imports no TensorFlow (the learner and the actor
are `launch.lazy` references, imported in their own processes).
"""

import functools
import os
from typing import Any, Callable, Optional

from repertory import launch
from repertory.components import replay as replay_lib
from repertory.agents.actor_critic import tables


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
                 experiment: Any) -> launch.CourierNode:
  """The V-trace learner (`learning.make_learner`) sampling `replay`'s
  queue, with the experiment's logdir, seed and checkpoint settings."""
  return launch.CourierNode(
      launch.lazy('repertory.agents.actor_critic.learning:make_learner'),
      config, spec, replay, tables.TABLE, counter=counter,
      logdir=experiment.logdir, seed=experiment.seed,
      checkpoint=experiment.checkpoint)


def eval_actor_factory(config: Any, spec: Any) -> Callable[..., Any]:
  """What `experiment.add_monitor` calls to build the evaluation actor
  (`acting.make_eval_actor`), in the monitor's process."""
  return functools.partial(
      launch.lazy('repertory.agents.actor_critic.acting:make_eval_actor'),
      config, spec)
