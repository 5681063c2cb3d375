"""The actor-critic's unroll queue (Reverb) and its item signature."""

from typing import Any, List, Optional

import numpy as np

from repertory.agents.actor_critic import config as config_lib

TABLE = 'queue'


def unroll_signature(config: config_lib.ActorCriticConfig, spec: Any,
                     envs_per_item: Optional[int] = None) -> Any:
  """The signature of the queue's items (one environment's unroll, or
  `envs_per_item` of them)."""
  # pylint: disable=g-import-not-at-top  # TensorFlow: in the replay node.
  from repertory.components import adders
  from repertory.agents.actor_critic import networks as networks_lib
  # pylint: enable=g-import-not-at-top
  num_actions = networks_lib.num_actions(spec.actions)
  return adders.unroll_signature(
      adders.EnvironmentSpec(spec.observations, spec.actions, None, None),
      config.unroll_length,
      extras_spec={'logits': np.zeros((num_actions,), np.float32)},
      core_state_spec=networks_lib.state_spec(config),
      envs_per_item=envs_per_item)


def make_tables(config: config_lib.ActorCriticConfig, spec: Any,
                table: str = TABLE,
                envs_per_actor: Optional[int] = None) -> List[Any]:
  """The unroll queue: each unroll is consumed once; actors block when full.

  With `config.train` off nothing samples, so the table drops its oldest
  unrolls instead of blocking the actors (acting throughput measurements).
  With `config.batched_items` an item holds the unrolls of an actor's
  `envs_per_actor` environments (then required), and the queue's sizes,
  in unrolls in the config, are rounded up to whole items.
  """
  import reverb  # pylint: disable=g-import-not-at-top
  from repertory.components import replay  # pylint: disable=g-import-not-at-top
  if config.batched_items and not envs_per_actor:
    raise ValueError(
        'Config.batched_items=True: make_tables needs envs_per_actor (the '
        f'unrolls in each item), got {envs_per_actor!r}.')
  envs_per_item = envs_per_actor if config.batched_items else None
  signature = unroll_signature(config, spec, envs_per_item)
  items = lambda unrolls: -(-unrolls // (envs_per_item or 1))
  if config.train:
    return [replay.queue_table(table, items(config.max_queue_size),
                               signature=signature,
                               batch_size=items(config.batch_size))]
  return [reverb.Table(
      name=table, sampler=reverb.selectors.Fifo(),
      remover=reverb.selectors.Fifo(), max_size=items(config.max_queue_size),
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)]
