"""Reverb table builders: uniform and prioritized replay, FIFO queues.

The rate limiter is the lever that balances data production (actors) against
consumption (the learner): `MinSize` lets the learner sample as soon as the
table holds enough items; `SampleToInsertRatio` keeps the number of times an
item is sampled close to `samples_per_insert`, blocking whichever side runs
ahead by more than the error buffer.
"""

from typing import Optional

import reverb

# Acme's default: tolerate a 10% deviation from samples_per_insert,
# accumulated over min_size_to_sample items.
DEFAULT_TOLERANCE_RATE = 0.1


def error_buffer_for(samples_per_insert: float,
                     min_size_to_sample: int,
                     tolerance_rate: float = DEFAULT_TOLERANCE_RATE,
                     batch_size: int = 1) -> float:
  """The error buffer derived from the samples-per-insert ratio.

  It allows a deviation of `tolerance_rate * samples_per_insert` per item
  over `min_size_to_sample` items, but never less than what keeps both sides
  moving: one insert's worth of samples (`max(1, samples_per_insert)`, below
  which Reverb can block forever) and one batch.
  """
  if samples_per_insert <= 0:
    raise ValueError(
        f'samples_per_insert must be > 0, got {samples_per_insert}.')
  return max(tolerance_rate * samples_per_insert * min_size_to_sample,
             2.0 * max(1.0, samples_per_insert), float(batch_size))


def rate_limiter(min_size_to_sample: int,
                 samples_per_insert: Optional[float] = None,
                 error_buffer: Optional[float] = None,
                 batch_size: int = 1) -> reverb.rate_limiters.RateLimiter:
  """`MinSize`, or `SampleToInsertRatio` when `samples_per_insert` is set.

  Args:
    min_size_to_sample: the learner waits until the table holds this many.
    samples_per_insert: if set, the target number of samples per item.
    error_buffer: the allowed deviation (in samples); derived with
      `error_buffer_for` when None.
    batch_size: the learner's batch size (used to derive the error buffer).
  """
  if min_size_to_sample < 1:
    raise ValueError(
        f'min_size_to_sample must be >= 1, got {min_size_to_sample}.')
  if samples_per_insert is None:
    if error_buffer is not None:
      raise ValueError(
          'error_buffer only applies with samples_per_insert (a '
          'SampleToInsertRatio limiter); set samples_per_insert or drop it.')
    return reverb.rate_limiters.MinSize(min_size_to_sample)
  if error_buffer is None:
    error_buffer = error_buffer_for(samples_per_insert, min_size_to_sample,
                                    batch_size=batch_size)
  floor = max(1.0, samples_per_insert)
  if error_buffer < floor:
    raise ValueError(
        f'error_buffer={error_buffer} is smaller than max(1, '
        f'samples_per_insert={samples_per_insert}) = {floor}: one insert '
        'would move the sample/insert balance past the buffer and block both '
        f'actors and learner (deadlock). Use error_buffer >= {floor}, e.g. '
        'error_buffer_for(samples_per_insert, min_size_to_sample).')
  return reverb.rate_limiters.SampleToInsertRatio(
      samples_per_insert=samples_per_insert,
      min_size_to_sample=min_size_to_sample,
      error_buffer=float(error_buffer))


def _check_sizes(name, max_size, min_size_to_sample, batch_size):
  if max_size < 1:
    raise ValueError(f'Table {name!r}: max_size must be >= 1, got {max_size}.')
  if min_size_to_sample > max_size:
    raise ValueError(
        f'Table {name!r}: min_size_to_sample={min_size_to_sample} exceeds '
        f'max_size={max_size}; the learner could never start sampling.')
  if batch_size > max_size:
    raise ValueError(
        f'Table {name!r}: max_size={max_size} is smaller than one batch '
        f'(batch_size={batch_size}); use max_size >= batch_size.')


def uniform_replay_table(name: str,
                         max_size: int,
                         signature=None,
                         min_size_to_sample: int = 1,
                         samples_per_insert: Optional[float] = None,
                         error_buffer: Optional[float] = None,
                         batch_size: int = 1,
                         max_times_sampled: int = 0) -> reverb.Table:
  """Uniform sampling, FIFO removal once `max_size` is reached."""
  _check_sizes(name, max_size, min_size_to_sample, batch_size)
  return reverb.Table(
      name=name,
      sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(),
      max_size=max_size,
      rate_limiter=rate_limiter(min_size_to_sample, samples_per_insert,
                                error_buffer, batch_size),
      max_times_sampled=max_times_sampled,
      signature=signature)


def prioritized_replay_table(name: str,
                             max_size: int,
                             priority_exponent: float = 0.6,
                             signature=None,
                             min_size_to_sample: int = 1,
                             samples_per_insert: Optional[float] = None,
                             error_buffer: Optional[float] = None,
                             batch_size: int = 1) -> reverb.Table:
  """Prioritized replay (Schaul et al., 2016): P(i) ∝ p_i^exponent.

  Items are removed first-in first-out once `max_size` is reached.
  """
  _check_sizes(name, max_size, min_size_to_sample, batch_size)
  if not 0.0 <= priority_exponent <= 1.0:
    raise ValueError(
        f'priority_exponent must be in [0, 1], got {priority_exponent}.')
  return reverb.Table(
      name=name,
      sampler=reverb.selectors.Prioritized(priority_exponent),
      remover=reverb.selectors.Fifo(),
      max_size=max_size,
      rate_limiter=rate_limiter(min_size_to_sample, samples_per_insert,
                                error_buffer, batch_size),
      signature=signature)


def queue_table(name: str,
                max_size: int,
                signature=None,
                batch_size: int = 1) -> reverb.Table:
  """A FIFO queue: every item is sampled exactly once (IMPALA, SEED, PPO).

  Inserts block while the queue is full, samples while it is empty.

  Args:
    name: the table name.
    max_size: queue capacity; must hold at least one batch. For synchronous
      algorithms (PPO) it must hold a whole round of items.
    signature: the item signature (e.g. `adders.unroll_signature(...)`).
    batch_size: the learner's batch size (checked against max_size).
  """
  _check_sizes(name, max_size, 1, batch_size)
  return reverb.Table.queue(name=name, max_size=max_size, signature=signature)
