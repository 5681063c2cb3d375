"""Ape-X DQN hyperparameters (Horgan et al. 2018, "Distributed Prioritized
Experience Replay", appendix C), scaled down to small control tasks."""

import dataclasses
from typing import ClassVar

from repertory.agents.prioritized_replay import config as replay_config
from repertory.components import specs

INITIAL_PRIORITIES = replay_config.INITIAL_PRIORITIES


@dataclasses.dataclass
class Config(replay_config.PrioritizedReplayConfig):
  """Ape-X DQN settings: those of `PrioritizedReplayConfig`, whose defaults
  are Ape-X's. The items are n-step transitions; `initial_priority='actor'`
  is |delta| from the actor's own Q-values (Ape-X, algorithm 1).

  Attributes:
    torso: the Q network's torso, one of `specs.TORSOS`: 'mlp' (of
      `torso_sizes`), 'minatar' (the MinAtar paper's conv 16 3x3 + linear
      128, then the dueling head), or 'auto' (the default: 'minatar' for
      MinAtar's boards, `specs.resolve_torso`).
  """
  NAME: ClassVar[str] = 'Ape-X'

  torso: str = 'auto'

  def __post_init__(self):
    super().__post_init__()
    if self.torso not in specs.TORSOS:
      raise ValueError(f'Ape-X Config.torso={self.torso!r}; choose one of '
                       f'{specs.TORSOS}.')
