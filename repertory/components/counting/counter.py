"""Counters shared across nodes, with Acme's hierarchical prefixes.

A root `Counter` runs in its own node (`launch.CourierNode(Counter)`); every
actor and the learner make a child `Counter(parent=handle, prefix='actor')`
whose `increment(steps=n)` adds locally and, at most every `time_delta`
seconds, sends the accumulated increments to the parent as `actor_steps`.
"""

import json
import os
import threading
import time
from typing import Any, Dict, Mapping, Optional

from absl import logging

from repertory import core
from repertory import launch

Number = float


class Counter(core.Saveable):
  """Thread-safe counts, optionally forwarded to a parent counter.

  Example::

    root = Counter()                                   # in its own node
    actor_counter = Counter(root, 'actor', time_delta=1.0)
    actor_counter.increment(steps=8, episodes=1)
    root.get_counts()   # {'actor_steps': 8, 'actor_episodes': 1} (after sync)
  """

  def __init__(self,
               parent: Optional[Any] = None,
               prefix: str = '',
               time_delta: float = 1.0,
               return_only_prefixed: bool = False,
               checkpoint_path: Optional[str] = None,
               checkpoint_every_seconds: float = 10.0):
    """Creates the counter.

    Args:
      parent: a `Counter` or a handle/proxy of one (anything with
        `increment(**counts)` returning the parent's counts).
      prefix: keys are sent to the parent as f'{prefix}_{key}'.
      time_delta: the shortest time (s) between two pushes to the parent (0
        pushes on every increment).
      return_only_prefixed: if True, `get_counts` returns only this counter's
        own totals (keys without prefix); otherwise the parent's last known
        counts (all keys, e.g. the sum over every actor) plus the increments
        not yet sent, with this counter's keys prefixed.
      checkpoint_path: a JSON file the counts are saved to (at most every
        `checkpoint_every_seconds`, and when the program stops) and restored
        from at construction: counts continue when a run resumes.
      checkpoint_every_seconds: see `checkpoint_path`.
    """
    if parent is not None and not hasattr(parent, 'increment'):
      raise TypeError(
          f'Counter parent {parent!r} has no increment(); pass a Counter or '
          'the (dereferenced) handle of a CourierNode(Counter).')
    self._parent = parent
    self._prefix = prefix
    self._time_delta = time_delta
    self._return_only_prefixed = return_only_prefixed
    self._lock = threading.Lock()
    self._push_lock = threading.Lock()
    self._counts: Dict[str, Number] = {}
    self._cache: Dict[str, Number] = {}  # increments not yet sent.
    self._parent_counts: Dict[str, Number] = {}
    self._last_sync = -float('inf')
    self._checkpoint_path = checkpoint_path
    self._checkpoint_every = checkpoint_every_seconds
    self._last_checkpoint = time.monotonic()
    self._checkpoint_lock = threading.Lock()
    if checkpoint_path is not None:
      if os.path.exists(checkpoint_path):
        with open(checkpoint_path) as f:
          self.restore(json.load(f))
        logging.info('Counts restored from %s: %s', checkpoint_path,
                     self._counts)
      if launch.get_launch_type() is not None:
        launch.register_stop_handler(self.checkpoint)

  def checkpoint(self) -> None:
    """Writes the counts to `checkpoint_path` now (atomically)."""
    if self._checkpoint_path is None:
      return
    with self._checkpoint_lock:
      counts = self.save()
      os.makedirs(os.path.dirname(self._checkpoint_path) or '.',
                  exist_ok=True)
      tmp = self._checkpoint_path + '.tmp'
      with open(tmp, 'w') as f:
        json.dump(counts, f)
      os.replace(tmp, self._checkpoint_path)
      self._last_checkpoint = time.monotonic()

  def _prefixed(self, key: str) -> str:
    return f'{self._prefix}_{key}' if self._prefix else key

  def increment(self, **counts: Number) -> Dict[str, Number]:
    """Adds `counts` and returns `get_counts()`."""
    with self._lock:
      for key, value in counts.items():
        self._counts[key] = self._counts.get(key, 0) + value
        self._cache[key] = self._cache.get(key, 0) + value
      due = (self._parent is not None and
             time.monotonic() - self._last_sync >= self._time_delta)
    if due:
      self._push(force=False)
    if (self._checkpoint_path is not None and
        time.monotonic() - self._last_checkpoint >= self._checkpoint_every):
      self.checkpoint()
    return self.get_counts()

  def flush(self) -> None:
    """Sends pending increments to the parent now; returns once they, and
    any push another thread had in flight, have arrived."""
    if self._parent is not None:
      self._push(force=True)

  def _push(self, force: bool) -> None:
    # One push at a time: a flush that returned has seen every earlier push
    # arrive (a stop handler's flush racing a step's push lost its counts).
    with self._push_lock:
      with self._lock:
        now = time.monotonic()
        if not force and now - self._last_sync < self._time_delta:
          return  # Another thread pushed meanwhile.
        push = {self._prefixed(k): v for k, v in self._cache.items()}
        self._cache = {}
        self._last_sync = now
      parent_counts = self._parent.increment(**push)
      with self._lock:
        self._parent_counts = dict(parent_counts)

  def get_counts(self) -> Dict[str, Number]:
    """This counter's counts, merged with the parent's last known ones."""
    with self._lock:
      if self._return_only_prefixed:
        return dict(self._counts)
      if self._parent is None:
        return {self._prefixed(k): v for k, v in self._counts.items()}
      # The parent's last known totals plus what is not sent yet.
      counts = dict(self._parent_counts)
      for key, value in self._cache.items():
        counts[self._prefixed(key)] = counts.get(self._prefixed(key), 0) + value
      for key, value in self._counts.items():
        counts.setdefault(self._prefixed(key), value)
      return counts

  def save(self) -> Mapping[str, Number]:
    with self._lock:
      return dict(self._counts)

  def restore(self, state: Mapping[str, Number]) -> None:
    with self._lock:
      self._counts = dict(state)
      self._cache = {}
