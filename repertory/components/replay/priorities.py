"""Asynchronous priority updates from the learner (prioritized replay)."""

import queue
import threading
from typing import Optional

from absl import logging
import numpy as np
import reverb


class PriorityUpdater:
  """Sends `mutate_priorities` to Reverb from a background thread.

  `update(keys, priorities)` only enqueues (it never blocks the learner's
  step); if the queue is full the update is dropped and counted in
  `num_dropped` (priorities are refreshed the next time an item is sampled).

  Example::

    updater = PriorityUpdater(client, 'replay')
    sample = next(iterator)
    ...
    updater.update(sample.info.key, new_priorities)
  """

  def __init__(self,
               client: reverb.Client,
               table: str,
               max_queue_size: int = 64):
    if max_queue_size < 1:
      raise ValueError(f'max_queue_size must be >= 1, got {max_queue_size}.')
    self._client = client
    self._table = table
    self._queue = queue.Queue(maxsize=max_queue_size)
    self._stop = threading.Event()
    self.num_sent = 0
    self.num_dropped = 0
    self.last_error: Optional[Exception] = None
    self._thread = threading.Thread(
        target=self._run, name=f'priority_updater_{table}', daemon=True)
    self._thread.start()
    # Made by a node of a launched program: closed when it stops.
    from repertory import launch  # pylint: disable=g-import-not-at-top
    launch.close_at_stop(self.close)

  def update(self, keys, priorities) -> None:
    """Enqueues new priorities for the sampled `keys` ([B] each)."""
    keys = np.asarray(keys, np.uint64).reshape(-1)
    priorities = np.asarray(priorities, np.float64).reshape(-1)
    if keys.shape != priorities.shape:
      raise ValueError(
          f'PriorityUpdater: {keys.shape[0]} keys but {priorities.shape[0]} '
          'priorities; pass one priority per sampled key.')
    if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
      raise ValueError(
          f'PriorityUpdater: priorities must be finite and >= 0, got '
          f'{priorities[~np.isfinite(priorities) | (priorities < 0)][:5]}.')
    try:
      self._queue.put_nowait((keys, priorities))
    except queue.Full:
      self.num_dropped += 1

  def _run(self) -> None:
    while not self._stop.is_set():
      try:
        keys, priorities = self._queue.get(timeout=0.1)
      except queue.Empty:
        continue
      try:
        self._client.mutate_priorities(
            self._table, updates=dict(zip(keys.tolist(),
                                          priorities.tolist())))
        self.num_sent += 1
      except Exception as e:  # pylint: disable=broad-except
        self.last_error = e
        logging.warning('PriorityUpdater: mutate_priorities on %r failed: %s',
                        self._table, e)
      finally:
        self._queue.task_done()

  def flush(self, timeout_s: float = 10.0) -> None:
    """Blocks until every enqueued update was sent (for tests, shutdown)."""
    done = threading.Event()

    def wait():
      self._queue.join()
      done.set()

    threading.Thread(target=wait, daemon=True).start()
    if not done.wait(timeout_s):
      raise TimeoutError(
          f'PriorityUpdater: {self._queue.qsize()} updates to table '
          f'{self._table!r} still unsent after {timeout_s}s.')

  def close(self) -> None:
    self._stop.set()
    self._thread.join(timeout=5)
