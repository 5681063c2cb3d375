"""Ape-X DQN hyperparameters (Horgan et al. 2018, "Distributed Prioritized
Experience Replay", appendix C), scaled down to small control tasks."""

import dataclasses
from typing import ClassVar

from repertory.agents.prioritized_replay import config as replay_config

INITIAL_PRIORITIES = replay_config.INITIAL_PRIORITIES


@dataclasses.dataclass
class Config(replay_config.PrioritizedReplayConfig):
  """Ape-X DQN settings: those of `PrioritizedReplayConfig`, whose defaults
  are Ape-X's. The items are n-step transitions; `initial_priority='actor'`
  is |delta| from the actor's own Q-values (Ape-X, algorithm 1)."""
  NAME: ClassVar[str] = 'Ape-X'
