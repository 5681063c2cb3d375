"""Reverb -> tf.data: batched samples with their sample info.

Each element is a `reverb.ReplaySample(info, data)`: `data` has the table
signature's structure with a leading batch dimension; `info` holds `key`
(for priority updates), `probability` and `table_size` (for importance
weights, see `repertory.components.losses.importance_weights`), `priority`
and `times_sampled`, each [B].
"""

import functools
import queue
import threading
import time
from typing import Any, Iterator, Optional, Tuple, Union

from absl import logging
import reverb
import tensorflow as tf
import tree

from repertory.launch.process import tf_internals


def _address(server) -> str:
  if isinstance(server, str):
    return server
  if hasattr(server, 'server_address'):
    return server.server_address
  raise TypeError(
      f'Expected a Reverb server address "host:port" or a reverb.Client, got '
      f'{type(server).__name__}.')


def make_dataset(server_address: Union[str, reverb.Client],
                 table: str,
                 batch_size: Optional[int],
                 prefetch_size: Optional[int] = None,
                 max_in_flight_samples_per_worker: Optional[int] = None,
                 num_workers_per_iterator: int = -1,
                 rate_limiter_timeout_ms: int = -1,
                 get_signature_timeout_s: int = 60,
                 drop_remainder: bool = True,
                 unbatch_items: bool = False):
  """A `tf.data.Dataset` of batched `ReplaySample`s from a Reverb table.

  Args:
    server_address: "host:port" or a `reverb.Client` (a dereferenced
      ReverbNode handle).
    table: the table name; it must have a signature (build it with the
      adder's `signature(...)`).
    batch_size: samples per batch (drop_remainder); None yields single
      samples (needed for variable-length items).
    prefetch_size: batches prefetched (default: tf.data.AUTOTUNE).
    max_in_flight_samples_per_worker: samples requested ahead per worker
      (default 2 * batch_size). For a queue, these leave the queue early.
    num_workers_per_iterator: Reverb sampler workers (-1: auto).
    rate_limiter_timeout_ms: if >= 0, the dataset ends (OutOfRange) when
      sampling blocks longer than this; -1 waits forever (use
      `StarvationLoggingIterator` to see what it waits for).
    get_signature_timeout_s: how long to wait for the server to answer.
    drop_remainder: with a rate-limiter timeout, the samples taken before
      the dataset ends form a last, smaller batch; True drops it (for a
      queue those items are lost), False yields it.
    unbatch_items: every item holds K samples along the leading dimension
      of all its fields (`UnrollAdder(batched_items=True)`, signature
      `unroll_signature(..., envs_per_item=K)`): each is split into K
      samples, which share the item's `info`, before batching. In-flight
      requests are then ceil(max_in_flight_samples_per_worker / K) items.
  """
  address = _address(server_address)
  if batch_size is not None and batch_size < 1:
    raise ValueError(f'batch_size must be >= 1 or None, got {batch_size}.')
  if max_in_flight_samples_per_worker is None:
    max_in_flight_samples_per_worker = 2 * (batch_size or 1)
  signature = _signature(address, table, get_signature_timeout_s)
  per_item = _samples_per_item(table, signature) if unbatch_items else 1
  dataset = reverb.TrajectoryDataset(
      server_address=address,
      table=table,
      shapes=tree.map_structure(lambda x: x.shape, signature),
      dtypes=tree.map_structure(lambda x: x.dtype, signature),
      max_in_flight_samples_per_worker=-(
          -max_in_flight_samples_per_worker // per_item),
      num_workers_per_iterator=num_workers_per_iterator,
      rate_limiter_timeout_ms=rate_limiter_timeout_ms)
  if unbatch_items:
    dataset = dataset.map(functools.partial(_with_info_per_sample,
                                            per_item)).unbatch()
  if batch_size is not None:
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  return dataset.prefetch(
      tf.data.AUTOTUNE if prefetch_size is None else prefetch_size)


def _signature(address: str, table: str, timeout_s: int) -> Any:
  """The table's signature, or one line on why there is none."""
  try:
    info = reverb.Client(address).server_info(timeout_s)
  except reverb.errors.DeadlineExceededError as e:
    raise ValueError(
        f'make_dataset: no answer from the Reverb server at {address} within '
        f'{timeout_s}s ({e}).') from e
  if table not in info or not info[table].signature:
    problem = (f'no table {table!r} (tables: {", ".join(sorted(info))})'
               if table not in info else f'table {table!r} has no signature')
    raise ValueError(
        f'make_dataset: cannot read table {table!r} at {address}: {problem}. '
        'The table must exist and have a signature (e.g. '
        'signature=adders.unroll_signature(...)).')
  return info[table].signature


def _samples_per_item(table: str, signature: Any) -> int:
  """K, the leading dimension every field of a batched item shares."""
  leading = {s.shape[0] if s.shape.rank else None
             for s in tree.flatten(signature)}
  if len(leading) != 1 or None in leading:
    raise ValueError(
        f'make_dataset(unbatch_items=True): the fields of table {table!r} do '
        f'not share a leading dimension (leading dimensions {leading}); its '
        'items must hold K samples each, e.g. signature='
        'adders.unroll_signature(..., envs_per_item=K).')
  return int(leading.pop())


def _with_info_per_sample(per_item: int, sample: reverb.ReplaySample
                          ) -> reverb.ReplaySample:
  """An item's info repeated for each of its `per_item` samples."""
  info = tf.nest.map_structure(lambda x: tf.fill([per_item], x), sample.info)
  return reverb.ReplaySample(info=info, data=sample.data)


def table_status(client: reverb.Client, table: str) -> str:
  """A one-line description of a table's fill and rate limiter state."""
  try:
    info = client.server_info(timeout=5)[table]
  except Exception as e:  # pylint: disable=broad-except
    return f'table {table!r}: server_info failed ({e})'
  limiter = info.rate_limiter_info
  return (f'table {table!r}: size {info.current_size}/{info.max_size}, '
          f'inserts completed {limiter.insert_stats.completed}, '
          f'samples completed {limiter.sample_stats.completed}, '
          f'min_size_to_sample {limiter.min_size_to_sample}, '
          f'samples_per_insert {limiter.samples_per_insert:g}')


_STOP_POLL_S = 0.5


class StarvationLoggingIterator:
  """Wraps a dataset iterator; logs what it waits for while a batch is late.

  `next()` runs on a helper thread; every `log_every_s` seconds without a
  batch it logs e.g. "learner waiting 30s for a batch from table 'queue':
  size 3/64, inserted 3, sampled 0, ...", and after `timeout_s` (if set) it
  raises a `TimeoutError` carrying the same description. Inside a launched
  program that starts stopping while it waits, it raises `StopIteration`
  within `_STOP_POLL_S` (`launch.run_until_stop` then ends the node's loop),
  so a learner starved at the end of a run meets its termination notice.
  """

  def __init__(self,
               iterator: Iterator[Any],
               client: reverb.Client,
               table: str,
               log_every_s: float = 30.0,
               timeout_s: Optional[float] = None,
               name: str = 'learner'):
    self._iterator = iterator
    self._client = client
    self._table = table
    self._log_every_s = log_every_s
    self._timeout_s = timeout_s
    self._name = name
    # A daemon thread, so that a process never hangs at exit on a blocked
    # next() (a ThreadPoolExecutor's threads are joined at exit).
    self._requests = queue.Queue()
    self._results = queue.Queue()
    self._pending = False
    self._next = tf_internals.CancellableNext(iterator)
    self._thread = threading.Thread(target=self._work, daemon=True,
                                    name=f'dataset_next_{table}')
    self._thread.start()
    # Made by a node of a launched program: closed when it stops.
    from repertory import launch  # pylint: disable=g-import-not-at-top
    launch.close_at_stop(self.close)

  def _work(self) -> None:
    while self._requests.get() is not None:
      try:
        self._results.put((True, self._next()))
      except BaseException as e:  # pylint: disable=broad-except
        self._results.put((False, e))

  def __iter__(self):
    return self

  def __next__(self):
    if not self._pending:
      self._requests.put(True)
      self._pending = True
    start = last_log = time.monotonic()
    while True:
      try:
        ok, value = self._results.get(
            timeout=min(self._log_every_s, _STOP_POLL_S))
        break
      except queue.Empty:
        from repertory import launch  # pylint: disable=g-import-not-at-top
        if launch.stopping():
          raise StopIteration from None  # The request stays pending.
        now = time.monotonic()
        waited = now - start
        timed_out = self._timeout_s is not None and waited >= self._timeout_s
        if now - last_log < self._log_every_s and not timed_out:
          continue
        last_log = now
        status = table_status(self._client, self._table)
        if self._timeout_s is not None and waited >= self._timeout_s:
          raise TimeoutError(
              f'{self._name}: no batch after {waited:.0f}s; {status}. Are the '
              'actors running and writing to this table?') from None
        logging.warning('%s waiting %.0fs for a batch from %s', self._name,
                        waited, status)
    self._pending = False
    if ok:
      return value
    raise value

  def close(self) -> None:
    """Ends the helper thread: a `next()` blocked in Reverb (a starved
    table, a stopped server) is cancelled, which releases the Reverb
    sampler's threads once the iterator is dropped."""
    self._requests.put(None)
    cancel = getattr(self._next, 'cancel', None)
    if cancel is not None:
      cancel()


def pad_batch(data: Any, batch_size: int) -> Tuple[Any, tf.Tensor]:
  """A sampled batch cut short (fewer than `batch_size` rows, e.g. by the
  rate limiter's timeout) padded with copies of its first row to the static
  shape `[batch_size, ...]`; returns (padded, number of real rows)."""
  num_real = tf.shape(tf.nest.flatten(data)[0])[0]

  def pad(x):
    padded = tf.concat([x, tf.repeat(x[:1], batch_size - num_real, axis=0)],
                       0)
    return tf.ensure_shape(padded, [batch_size] + x.shape[1:])
  return tf.nest.map_structure(pad, data), num_real
