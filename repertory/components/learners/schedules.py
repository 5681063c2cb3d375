"""Linear decay to 0 over a step budget (SB3's `lin_<value>` schedules).

Update k (from 0), each worth `steps_per_update` environment steps, uses

    value · max(0, 1 - (k + 1) · steps_per_update / anneal_steps)

The update's own steps count as done: SB3 moves its progress after it
collects a rollout and before it trains on it. PPO anneals its learning rate
and clip range this way (a round per update), IMPALA and SEED their learning
rate (a batch of unrolls per update).
"""

from typing import Dict

import tensorflow as tf


def remaining_fraction(update_index: int, steps_per_update: int,
                       anneal_steps: int) -> float:
  """`max(0, 1 - (update_index + 1) * steps_per_update / anneal_steps)`."""
  return max(0.0, 1.0 - (update_index + 1) * steps_per_update / anneal_steps)


class LinearDecay:
  """A value an optimizer or loss reads, decayed per update.

  With `anneal_steps` 0 it is the plain float (`value`) and `update` does
  nothing, so a graph without a schedule is built exactly as before.
  """

  def __init__(self, name: str, value: float, steps_per_update: int,
               anneal_steps: int):
    self.name, self._initial = name, float(value)
    self._steps_per_update, self._anneal_steps = steps_per_update, anneal_steps
    self.value = (tf.Variable(self._initial, trainable=False,
                              dtype=tf.float32, name=name)
                  if anneal_steps else self._initial)

  def at(self, update_index: int) -> float:
    """The value update `update_index` uses."""
    if not self._anneal_steps:
      return self._initial
    return self._initial * remaining_fraction(
        update_index, self._steps_per_update, self._anneal_steps)

  def update(self, update_index: int) -> Dict[str, float]:
    """Sets the value for update `update_index`; `{'charts/<name>': value}`
    to log (empty without a schedule)."""
    if not self._anneal_steps:
      return {}
    value = self.at(update_index)
    self.value.assign(value)
    return {f'charts/{self.name}': value}
