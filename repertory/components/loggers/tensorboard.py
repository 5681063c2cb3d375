"""Writes numeric values as TensorBoard scalars and histograms (TensorFlow
imported lazily)."""

from typing import Optional

import numpy as np

from repertory.components.loggers import base


class TensorBoardLogger(base.Logger):
  """`tf.summary.scalar` for every number of a row, `tf.summary.histogram`
  for every distribution (a non-empty numeric array with at least one
  dimension, e.g. `'charts/policy_lag_histogram': lag` with `lag` [B]);
  other values (strings, empty arrays) are skipped.

  The step is `values[steps_key]` when present (e.g. 'actor_steps' from a
  counter), else the number of rows written. Events reach the file every
  `flush_seconds` (a live TensorBoard lags by at most that) and at
  `close()`. TensorFlow is imported on the first write, so environment-only
  processes that never write here do not import it.
  """

  def __init__(self, logdir: str, steps_key: Optional[str] = None,
               flush_seconds: float = 10.0):
    self._logdir = logdir
    self._flush_seconds = flush_seconds
    self._steps_key = steps_key
    self._writer = None
    self._rows = 0

  def write(self, values: base.LoggingData) -> None:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if self._writer is None:
      self._writer = tf.summary.create_file_writer(
          self._logdir, flush_millis=int(self._flush_seconds * 1000))
    step = self._rows
    if self._steps_key is not None:
      for key, value in values.items():
        if key == self._steps_key or key.endswith('/' + self._steps_key):
          step = int(base.to_scalar(value))
    with self._writer.as_default():
      for key, value in values.items():
        if base.is_distribution(value):
          tf.summary.histogram(key, base.to_numpy(value).astype(np.float64),
                               step=step)
          continue
        value = base.to_scalar(value)
        if base.is_number(value):
          tf.summary.scalar(key, value, step=step)
    self._rows += 1

  def close(self) -> None:
    if self._writer is not None:
      self._writer.flush()
      self._writer.close()
      self._writer = None
