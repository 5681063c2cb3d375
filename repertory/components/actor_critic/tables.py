"""The actor-critic's unroll queue (Reverb) and its item signature."""

from typing import Any, List

import numpy as np

from repertory.components.actor_critic import config as config_lib

TABLE = 'queue'


def unroll_signature(config: config_lib.ActorCriticConfig, spec: Any) -> Any:
  """The signature of the queue's items (one environment's unroll)."""
  # pylint: disable=g-import-not-at-top  # TensorFlow: in the replay node.
  from repertory.components import adders
  from repertory.components.actor_critic import networks as networks_lib
  # pylint: enable=g-import-not-at-top
  num_actions = networks_lib.num_actions(spec.actions)
  return adders.unroll_signature(
      adders.EnvironmentSpec(spec.observations, spec.actions, None, None),
      config.unroll_length,
      extras_spec={'logits': np.zeros((num_actions,), np.float32)},
      core_state_spec=networks_lib.state_spec(config))


def make_tables(config: config_lib.ActorCriticConfig, spec: Any,
                table: str = TABLE) -> List[Any]:
  """The unroll queue: each unroll is consumed once; actors block when full.

  With `config.train` off nothing samples, so the table drops its oldest
  unrolls instead of blocking the actors (acting throughput measurements).
  """
  import reverb  # pylint: disable=g-import-not-at-top
  from repertory.components import replay  # pylint: disable=g-import-not-at-top
  signature = unroll_signature(config, spec)
  if config.train:
    return [replay.queue_table(table, config.max_queue_size,
                               signature=signature,
                               batch_size=config.batch_size)]
  return [reverb.Table(
      name=table, sampler=reverb.selectors.Fifo(),
      remover=reverb.selectors.Fifo(), max_size=config.max_queue_size,
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)]
