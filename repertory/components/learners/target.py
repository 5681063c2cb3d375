"""Target-network updates: a periodic copy (DQN, Ape-X, R2D2) or Polyak
averaging, of the online network's variables into the target's.

    target = TargetUpdater(online.trainable_variables,
                           target.trainable_variables, period=100)
    ...
    target.maybe_update(step)    # after learner step `step`
"""

from typing import Sequence

import tensorflow as tf


class TargetUpdater:
  """Copies (or averages) online variables into target variables.

  Args:
    online: the online network's variables.
    target: the target network's, in the same order and shapes.
    period: update every this many steps.
    tau: 1.0 copies; below 1, target <- tau * online + (1 - tau) * target.
  """

  def __init__(self, online: Sequence[tf.Variable],
               target: Sequence[tf.Variable], period: int = 1,
               tau: float = 1.0):
    self._online, self._target = list(online), list(target)
    if len(self._online) != len(self._target) or any(
        o.shape != t.shape for o, t in zip(self._online, self._target)):
      raise ValueError(
          'TargetUpdater: online and target variables differ: '
          f'{[tuple(v.shape) for v in self._online]} vs '
          f'{[tuple(v.shape) for v in self._target]}.')
    if not isinstance(period, int) or period < 1:
      raise ValueError(f'TargetUpdater: period must be a positive int, got '
                       f'{period!r}.')
    if not 0.0 < tau <= 1.0:
      raise ValueError(f'TargetUpdater: tau must be in (0, 1], got {tau!r}.')
    self._period, self._tau = period, tau

  def update(self) -> None:
    """Updates the target now."""
    for target, online in zip(self._target, self._online):
      if self._tau == 1.0:
        target.assign(online)
      else:
        target.assign(self._tau * online + (1.0 - self._tau) * target)

  def maybe_update(self, step: int) -> bool:
    """Updates the target if `step` is a multiple of the period."""
    if step % self._period:
      return False
    self.update()
    return True
