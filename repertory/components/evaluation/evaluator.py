"""Runs evaluation episodes of a `core.Actor` in a `dm_env.Environment`."""

import dataclasses
from typing import List

import dm_env
import numpy as np

from repertory import core


@dataclasses.dataclass
class EvaluationResult:
  """Returns and lengths of finished evaluation episodes."""
  returns: List[float]
  lengths: List[int]

  @property
  def return_mean(self) -> float:
    return float(np.mean(self.returns)) if self.returns else float('nan')

  def as_dict(self, prefix: str = 'eval') -> dict:
    return {
        f'{prefix}_return_mean': self.return_mean,
        f'{prefix}_return_std': float(np.std(self.returns)),
        f'{prefix}_length_mean': float(np.mean(self.lengths)),
        f'{prefix}_episodes': len(self.returns),
    }


def evaluate(environment: dm_env.Environment, actor: core.Actor,
             num_episodes: int, max_steps_per_episode: int = 100_000
             ) -> EvaluationResult:
  """Plays `num_episodes` full episodes with `actor`; nothing is recorded.

  The actor should already hold the weights to evaluate (call
  `actor.update(wait=True)` first).
  """
  if num_episodes < 1:
    raise ValueError(f'num_episodes must be >= 1, got {num_episodes}.')
  returns, lengths = [], []
  for _ in range(num_episodes):
    timestep = environment.reset()
    actor.observe_first(timestep)
    episode_return, length = 0.0, 0
    while not timestep.last():
      action = actor.select_action(timestep.observation)
      timestep = environment.step(action)
      actor.observe(action, next_timestep=timestep)
      episode_return += float(np.sum(timestep.reward))
      length += 1
      if length >= max_steps_per_episode:
        break
    returns.append(episode_return)
    lengths.append(length)
  return EvaluationResult(returns, lengths)
