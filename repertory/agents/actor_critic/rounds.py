"""Synchronous rounds (PPO's): every actor's items of one policy version, or
an error.

A round of version v is complete when each of `num_actors` actors wrote its
`items_per_actor` items (unrolls, or per-player trajectories in self-play)
of version v to the queue. An item of an earlier version is dropped
(counted in `dropped`; one warning line per round that dropped any), one
of a later version or an extra one is an error, and a round not complete
after `round_timeout_s` fails naming the missing actors. A collector that
`follow`s its learner's published version moves a round on to a later
version the learner published meanwhile (a rollback, or a league
exploiter's restart), dropping the items collected so far.
Actors wait for the round's version with `wait_for_version`, which never
blocks one call for long, so a stopping program is noticed.
"""

import collections
import queue as queue_lib
import threading
import time
from typing import Any, Callable, Dict, Optional

from absl import logging
import numpy as np
import tree

from repertory.components import replay as replay_lib

# How long one read from the queue blocks before the stop and the round's
# deadline are checked.
POLL_S = 1.0


class RoundTimeoutError(TimeoutError):
  """A round did not complete: some actors' items never arrived."""


class PolicyLagError(RuntimeError):
  """An item of another version than the round's reached the learner."""


class RoundCollector:
  """Reads the queue in a thread of its own and assembles rounds."""

  def __init__(self, replay: Any, table: str, num_actors: int,
               items_per_actor: int, round_timeout_s: float,
               time_major: bool = True, name: str = 'PPO',
               envs_per_item: Optional[int] = None):
    """`time_major`: `collect` stacks items as `[T + 1, B, ...]` (else
    `[B, T + 1, ...]`); `name` heads its log lines and errors;
    `envs_per_item`: None for items of one unroll (`[T + 1, ...]`), N for
    items of N (`UnrollAdder(batched_items=True)`: `[N, T + 1, ...]`)."""
    if num_actors < 1 or items_per_actor < 1:
      raise ValueError(f'{name} needs num_actors >= 1 and items per actor >= '
                       f'1, got {num_actors} and {items_per_actor}.')
    self._replay, self._table = replay, table
    self._num_actors, self._envs_per_actor = num_actors, items_per_actor
    self._items = num_actors * items_per_actor
    self._timeout_s = round_timeout_s
    self._time_major, self._name = time_major, name
    self._batched = envs_per_item is not None
    self._unrolls = None
    self._published: Optional[Callable[[], int]] = None
    self.dropped = 0  # Unrolls of earlier versions, since the last take.
    self.dropped_total = 0  # ...and since the start.

  def follow(self, published: Callable[[], int]) -> None:
    """`published()` is the learner's newest version: an item of a later
    version than the round's is then legitimate up to it (the learner
    republished), and the round moves on to that version."""
    self._published = published

  def count_dropped(self, unrolls: int) -> None:
    """Counts `unrolls` a learner dropped after `collect` (a round made stale
    by a republish)."""
    self.dropped += unrolls
    self.dropped_total += unrolls

  def take_dropped(self) -> int:
    """Unrolls of earlier versions dropped since the last call."""
    dropped, self.dropped = self.dropped, 0
    return dropped

  def _next_unroll(self, timeout_s: float):
    """The next unroll, or None if none came in `timeout_s`. One reader
    thread iterates the dataset without a sampling timeout: an iterator that
    ends on a timeout can lose an item it took from the queue."""
    if self._unrolls is None:
      self._unrolls = queue_lib.Queue()
      dataset = replay_lib.make_dataset(
          self._replay, self._table, batch_size=None,
          max_in_flight_samples_per_worker=self._items,
          num_workers_per_iterator=1)
      threading.Thread(target=_read, args=(dataset, self._unrolls),
                       daemon=True, name=f'{self._table}-round-reader').start()
    try:
      unroll = self._unrolls.get(timeout=timeout_s)
    except queue_lib.Empty:
      return None
    if isinstance(unroll, Exception):
      self._unrolls = None
      raise unroll
    return unroll

  def collect(self, version: int, stopping: Callable[[], bool]
              ) -> Optional[Dict[str, np.ndarray]]:
    """The round of `version`, time-major (`[T + 1, B, ...]`, B sorted by
    actor; `[B, T + 1, ...]` without `time_major`), or None once
    `stopping()` holds while waiting."""
    per_actor = collections.defaultdict(list)
    dropped = collections.defaultdict(list)  # Earlier version -> actors.
    received, start = 0, time.monotonic()
    next_log = start + 10.0
    while received < self._items:
      unroll = self._next_unroll(POLL_S)
      if unroll is None:
        if stopping():
          self._log_dropped(dropped, version)
          return None
        now = time.monotonic()
        if now - start >= self._timeout_s:
          self._log_dropped(dropped, version)
          raise RoundTimeoutError(
              f'{self._name} round of version {version} incomplete after '
              f'{now - start:.0f}s: {self._status(per_actor)}')
        if now >= next_log:
          logging.info('%s learner waiting for round %d: %s', self._name,
                       version, self._status(per_actor))
          next_log = now + 10.0
        continue
      behaviour, actor_id = (int(np.ravel(unroll['policy_version'])[0]),
                             int(np.ravel(unroll['actor_id'])[0]))
      if behaviour < version:  # Left over from an earlier round: never used.
        self.count_dropped(_unrolls_in(unroll))
        dropped[behaviour].append(actor_id)
        continue
      if behaviour > version and self._published is not None and (
          behaviour <= self._published()):  # Republished: a new round.
        for actor, items in per_actor.items():
          self.count_dropped(sum(_unrolls_in(u) for u in items))
          dropped[version].extend([actor] * len(items))
        per_actor.clear()
        received, version, start = 0, behaviour, time.monotonic()
      if behaviour > version or not 0 <= actor_id < self._num_actors:
        raise PolicyLagError(
            f'{self._name} learner at version {version} received an item of '
            f'version '
            f'{behaviour} from actor {actor_id}; actors may only act with the '
            f'published version and ids are 0..{self._num_actors - 1}.')
      if len(per_actor[actor_id]) >= self._envs_per_actor:
        raise PolicyLagError(
            f'{self._name} actor {actor_id} wrote more than '
            f'{self._envs_per_actor} items of version {version}.')
      per_actor[actor_id].append(unroll)
      received += 1
    self._log_dropped(dropped, version)
    items = [u for a in sorted(per_actor) for u in per_actor[a]]
    if self._batched:
      return tree.map_structure(self._join, *items)
    # Per-step columns [T + 1, ...] -> [T + 1, B, ...]; scalars -> [B].
    axis = (lambda x: min(1, np.ndim(x))) if self._time_major else (
        lambda x: 0)
    return tree.map_structure(lambda *xs: np.stack(xs, axis=axis(xs[0])),
                              *items)

  def _join(self, *columns: np.ndarray) -> np.ndarray:
    """Items' columns of N unrolls each: per-step `[N, T + 1, ...]` ->
    `[T + 1, B, ...]` (time-major) or `[B, T + 1, ...]`; per-unroll `[N]`
    -> `[B]`."""
    joined = np.concatenate(columns, axis=0)
    if self._time_major and joined.ndim >= 2:
      return np.ascontiguousarray(np.swapaxes(joined, 0, 1))
    return joined

  def _log_dropped(self, dropped: Dict[int, list], version: int) -> None:
    """One line for the items of earlier versions one round dropped (e.g.
    the round in flight when a learner published a reset)."""
    if not dropped:
      return
    logging.warning(
        '%s learner dropped %d items of earlier versions before round %d: %s '
        '(%d dropped since the start).', self._name,
        sum(len(a) for a in dropped.values()), version,
        ', '.join(f'{len(a)} of version {v} (actors {sorted(set(a))})'
                  for v, a in sorted(dropped.items())),
        self.dropped_total)

  def _status(self, per_actor) -> str:
    missing = [a for a in range(self._num_actors)
               if len(per_actor.get(a, ())) < self._envs_per_actor]
    have = {a: len(u) for a, u in sorted(per_actor.items())}
    return (f'missing items from actors {missing} (items received per '
            f'actor: {have}; each actor writes {self._envs_per_actor}); '
            f'{replay_lib.table_status(self._replay, self._table)}')


def wait_for_version(learner: Any, version: int, stop: Any,
                     timeout_s: float, who: str = 'actor',
                     slice_s: float = 2.0) -> Optional[int]:
  """Waits until `learner.wait_for_version(v, slice_s)` (a call that returns
  the version served after at most `slice_s`) reaches `version`; returns the
  version served, or None once `stop` (an Event, or None) is set.

  Raises:
    TimeoutError: naming the version after `timeout_s`.
  """
  start = time.monotonic()
  while True:
    served = learner.wait_for_version(version, slice_s)
    if served >= version:
      return served
    if stop is not None and stop.is_set():
      return None
    waited = time.monotonic() - start
    if waited >= timeout_s:
      raise TimeoutError(
          f'{who}: waited {waited:.0f}s for the learner to publish version '
          f'{version}; it still serves {served}. Is the learner stuck '
          'waiting for another actor?')
    logging.log_every_n_seconds(
        logging.INFO, '%s waiting for version %d (learner at %d).', 10, who,
        version, served)


def _unrolls_in(item: Dict[str, Any]) -> int:
  """Unrolls in an item: 1, or N in one of `[N, T + 1, ...]` columns."""
  return int(np.size(item['policy_version']))


def _read(dataset, unrolls: queue_lib.Queue) -> None:
  try:
    for sample in dataset:
      unrolls.put(tree.map_structure(lambda x: x.numpy(), sample.data))
  except Exception as e:  # pylint: disable=broad-except
    unrolls.put(e)  # Raised in the learner (e.g. the server went away).
