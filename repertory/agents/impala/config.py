"""IMPALA hyperparameters (Espeholt et al. 2018, arXiv:1802.01561): those of
the V-trace actor-critic in `repertory.agents.actor_critic`.

This module imports neither TensorFlow nor Reverb.
"""

import dataclasses

from repertory.agents.actor_critic import config as actor_critic_config


@dataclasses.dataclass
class Config(actor_critic_config.ActorCriticConfig):
  """IMPALA's settings: the V-trace actor-critic's, every field documented in
  `ActorCriticConfig`; the defaults solve `catch` (see docs/impala.md)."""
