"""Writes numeric values as TensorBoard scalars and histograms.

The events are built as protocol buffers and written as TensorBoard's
record files with its pure-Python `RecordWriter`, without TensorFlow (its
`EventFileWriter` would import TensorFlow for `tf.io.gfile`, so logdirs are
local paths here): `tf.summary` in eager mode
creates a dozen `EagerTensor`s per value, and TensorFlow 2.15 on Python 3.11
leaks 48 bytes for each (see `networks.GraphFunction`): a learner logging
15 values and a histogram every 100 steps grew by ~13 KB per row. The files
hold scalars as `simple_value` summaries (what `tf.compat.v1.summary.scalar`
writes; read by TensorBoard and by `EventAccumulator.Scalars`) and histograms
as `tf.summary.histogram` writes them (tensor summaries with the
'histograms' plugin metadata).
"""

import os
import socket
import time
from typing import Optional

import numpy as np

from repertory.components.loggers import base

# `tf.summary.histogram`'s default number of buckets.
HISTOGRAM_BUCKETS = 30


def _scalar_value(tag: str, value: float):
  """A scalar as `simple_value`: what TensorBoard's scalars dashboard and
  `EventAccumulator.Scalars` read (a tensor summary is only seen by
  `EventAccumulator.Tensors`)."""
  from tensorboard.compat.proto import summary_pb2  # pylint: disable=g-import-not-at-top
  return summary_pb2.Summary.Value(tag=tag, simple_value=float(value))


def histogram_buckets(values: np.ndarray,
                      bucket_count: int = HISTOGRAM_BUCKETS) -> np.ndarray:
  """`[k, 3]` float64 rows (left edge, right edge, count), as TensorBoard's
  histogram plugin reads them: `bucket_count` equal buckets from the
  minimum to the maximum, or one bucket of width 1 around a constant."""
  values = np.asarray(values, np.float64).reshape(-1)
  low, high = float(values.min()), float(values.max())
  if low == high:
    return np.array([[low - 0.5, high + 0.5, float(values.size)]])
  edges = np.linspace(low, high, bucket_count + 1)
  counts, _ = np.histogram(values, bins=edges)
  return np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], -1)


def _histogram_value(tag: str, values: np.ndarray):
  from tensorboard.compat.proto import summary_pb2  # pylint: disable=g-import-not-at-top
  from tensorboard.compat.proto import tensor_pb2  # pylint: disable=g-import-not-at-top
  from tensorboard.compat.proto import tensor_shape_pb2  # pylint: disable=g-import-not-at-top
  from tensorboard.compat.proto import types_pb2  # pylint: disable=g-import-not-at-top
  buckets = histogram_buckets(values)
  shape = tensor_shape_pb2.TensorShapeProto(dim=[
      tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in buckets.shape])
  return summary_pb2.Summary.Value(
      tag=tag,
      tensor=tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE,
                                    tensor_shape=shape,
                                    tensor_content=buckets.tobytes()),
      metadata=summary_pb2.SummaryMetadata(
          plugin_data=summary_pb2.SummaryMetadata.PluginData(
              plugin_name='histograms')))


class _EventFile:
  """An append-only TensorBoard event file (`events.out.tfevents.*`)."""

  def __init__(self, logdir: str, flush_seconds: float):
    from tensorboard.compat.proto import event_pb2  # pylint: disable=g-import-not-at-top
    from tensorboard.summary.writer import record_writer  # pylint: disable=g-import-not-at-top
    os.makedirs(logdir, exist_ok=True)
    name = (f'events.out.tfevents.{int(time.time())}.{socket.gethostname()}.'
            f'{os.getpid()}.{id(self)}')
    self._records = record_writer.RecordWriter(
        open(os.path.join(logdir, name), 'wb'))
    self._flush_seconds = flush_seconds
    self._last_flush = time.monotonic()
    self.add(event_pb2.Event(wall_time=time.time(),
                             file_version='brain.Event:2'))

  def add(self, event) -> None:
    self._records.write(event.SerializeToString())
    if time.monotonic() - self._last_flush >= self._flush_seconds:
      self.flush()

  def flush(self) -> None:
    self._last_flush = time.monotonic()
    self._records.flush()

  def close(self) -> None:
    self._records.close()


class TensorBoardLogger(base.Logger):
  """A scalar for every number of a row, a histogram for every distribution
  (a non-empty numeric array with at least one dimension, e.g.
  `'charts/policy_lag_histogram': lag` with `lag` [B]); other values
  (strings, empty arrays) are skipped.

  Tags are `<prefix>/<key>` with a `prefix` (e.g. the node: 'learner').
  The step is `values[steps_key]` when present (e.g. 'actor_steps' from a
  counter), else the number of rows written. Events reach the file at the
  first write after `flush_seconds` (a live TensorBoard lags by about that)
  and at `close()`. Nothing here imports TensorFlow.
  """

  def __init__(self, logdir: str, steps_key: Optional[str] = None,
               flush_seconds: float = 10.0, prefix: str = ''):
    self._logdir = logdir
    self._prefix = prefix.rstrip('/') + '/' if prefix else ''
    self._flush_seconds = flush_seconds
    self._steps_key = steps_key
    self._writer = None
    self._rows = 0

  def write(self, values: base.LoggingData) -> None:
    from tensorboard.compat.proto import event_pb2  # pylint: disable=g-import-not-at-top
    from tensorboard.compat.proto import summary_pb2  # pylint: disable=g-import-not-at-top
    if self._writer is None:
      self._writer = _EventFile(self._logdir, self._flush_seconds)
    step = self._rows
    if self._steps_key is not None:
      for key, value in values.items():
        if key == self._steps_key or key.endswith('/' + self._steps_key):
          step = int(base.to_scalar(value))
    summary = summary_pb2.Summary()
    for key, value in values.items():
      if base.is_distribution(value):
        summary.value.append(_histogram_value(self._prefix + key,
                                              base.to_numpy(value)))
        continue
      value = base.to_scalar(value)
      if base.is_number(value):
        summary.value.append(_scalar_value(self._prefix + key, value))
    if summary.value:
      self._writer.add(event_pb2.Event(wall_time=time.time(), step=step,
                                             summary=summary))
    self._rows += 1

  def close(self) -> None:
    if self._writer is not None:
      self._writer.flush()
      self._writer.close()
      self._writer = None
