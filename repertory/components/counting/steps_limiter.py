"""Stops the program when a step budget is reached."""

import time
from typing import Any

from absl import logging

from repertory import core
from repertory import launch


class StepsLimiter(core.Worker):
  """A worker node that calls `launch.stop()` once `max_steps` are counted.

  Example::

    counter = program.add_node(launch.CourierNode(Counter))
    program.add_node(launch.CourierNode(StepsLimiter, counter, 1_000_000))
  """

  def __init__(self,
               counter: Any,
               max_steps: int,
               steps_key: str = 'actor_steps',
               poll_interval_s: float = 1.0):
    if max_steps < 0:
      raise ValueError(f'max_steps must be >= 0, got {max_steps}.')
    self._counter = counter
    self._max_steps = max_steps
    self._steps_key = steps_key
    self._poll_interval_s = poll_interval_s

  def run(self) -> None:
    stop_event = launch.stop_event()
    last_log = time.monotonic()
    while not stop_event.is_set():
      counts = self._counter.get_counts()
      steps = counts.get(self._steps_key, 0)
      if steps >= self._max_steps:
        logging.info('StepsLimiter: %s = %d reached max_steps = %d; stopping.',
                     self._steps_key, steps, self._max_steps)
        launch.stop()
        return
      if time.monotonic() - last_log > 60:
        logging.info('StepsLimiter: %s = %d of %d (known keys: %s).',
                     self._steps_key, steps, self._max_steps, sorted(counts))
        last_log = time.monotonic()
      stop_event.wait(self._poll_interval_s)
