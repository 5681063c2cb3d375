"""The logger interface and the fan-out / namespacing wrappers."""

import abc
import numbers
import threading
import time
from typing import Any, Dict, Mapping, Sequence

import numpy as np

LoggingData = Mapping[str, Any]


class Logger(abc.ABC):
  """Writes dicts of values (scalars, arrays, strings) somewhere.

  A numeric array (at least one dimension and one element) is a
  *distribution*, e.g. the policy lag of every item of a batch: TensorBoard
  draws it as a histogram, CSV files and the terminal get its mean
  (`summarize`). A 0-d array or a number is a scalar.
  """

  @abc.abstractmethod
  def write(self, values: LoggingData) -> None:
    """Writes one row of values."""

  def close(self) -> None:
    """Flushes and releases files."""


def to_scalar(value: Any) -> Any:
  """numpy / TF scalars to Python numbers; other values unchanged."""
  if hasattr(value, 'numpy'):
    value = value.numpy()
  if isinstance(value, np.ndarray) and value.size == 1:
    value = value.reshape(()).item()
  if isinstance(value, np.generic):
    value = value.item()
  return value


def to_numpy(value: Any) -> Any:
  """A TF tensor as numpy; other values unchanged."""
  return value.numpy() if hasattr(value, 'numpy') else value


def is_distribution(value: Any) -> bool:
  """True for a non-empty numeric numpy array (or tensor) with at least one
  dimension, whatever its size: a batch of one is still a batch."""
  value = to_numpy(value)
  return (isinstance(value, np.ndarray) and value.ndim >= 1 and
          value.size >= 1 and
          (np.issubdtype(value.dtype, np.number) or value.dtype == bool))


def summarize(value: Any) -> Any:
  """`to_scalar`, and a distribution's mean (what CSV and terminal show)."""
  if is_distribution(value):
    return float(np.mean(to_numpy(value)))
  value = to_scalar(value)
  if isinstance(value, np.ndarray) and value.size == 0:
    return float('nan')  # E.g. the lags of a batch whose items all dropped.
  return value


def is_number(value: Any) -> bool:
  return isinstance(value, numbers.Number) and not isinstance(value, bool)


class Dispatcher(Logger):
  """Writes every row to each of several loggers, one row at a time.

  A node's methods run on several threads (its run loop and the calls it
  serves); the lock keeps one row's writes from interleaving with
  another's in the file sinks behind it.
  """

  def __init__(self, loggers: Sequence[Logger]):
    self._loggers = list(loggers)
    self._lock = threading.Lock()

  def write(self, values: LoggingData) -> None:
    with self._lock:
      for logger in self._loggers:
        logger.write(values)

  def close(self) -> None:
    with self._lock:
      for logger in self._loggers:
        logger.close()


class NamespacedLogger(Logger):
  """Prefixes every key with f'{label}/' (e.g. 'actor/episode_return')."""

  def __init__(self, logger: Logger, label: str):
    self._logger = logger
    self._prefix = f'{label}/' if label else ''

  def write(self, values: LoggingData) -> None:
    self._logger.write({
        k if k.startswith(self._prefix) else self._prefix + k: v
        for k, v in values.items()})

  def close(self) -> None:
    self._logger.close()


class TimeFilter(Logger):
  """Forwards at most one row every `time_delta` seconds."""

  def __init__(self, logger: Logger, time_delta: float):
    self._logger = logger
    self._time_delta = time_delta
    self._last = -float('inf')

  def write(self, values: LoggingData) -> None:
    now = time.monotonic()
    if now - self._last >= self._time_delta:
      self._last = now
      self._logger.write(values)

  def close(self) -> None:
    self._logger.close()


class InMemoryLogger(Logger):
  """Keeps every row (tests, notebooks)."""

  def __init__(self):
    self.data: list[Dict[str, Any]] = []

  def write(self, values: LoggingData) -> None:
    self.data.append(dict(values))
