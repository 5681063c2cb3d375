"""`batched_handler`: stacks concurrent calls into one batched call.

This is the dynamic batching of SEED RL's central inference (Espeholt et al.,
2020, "SEED RL: Scalable and Efficient Deep-RL with Accelerated Central
Inference"): many actors call `server.inference(observation)` at the same
time; the server runs the policy once on the stacked batch and each actor
gets its own row back.
"""

import concurrent.futures
import datetime
import functools
import inspect
import threading
import time
from typing import Any, Callable, List, Optional, Tuple, Union

import numpy as np

from repertory.launch.api import context


def _tree():
  import tree  # pylint: disable=g-import-not-at-top  # dm-tree (no TF import)
  return tree


class _Request:
  __slots__ = ('args', 'kwargs', 'future', 'arrival')

  def __init__(self, args, kwargs):
    self.args = args
    self.kwargs = kwargs
    self.future = concurrent.futures.Future()
    self.arrival = time.monotonic()


class Batcher:
  """Collects calls of one bound method and runs them in batches."""

  def __init__(self, fn: Callable[..., Any], batch_size: int, timeout: float,
               max_parallelism: int, pad_batch: bool):
    self._fn = fn
    self._batch_size = batch_size
    self._timeout = timeout
    self._pad_batch = pad_batch
    self._pending: List[_Request] = []
    self._closed = False
    self._cond = threading.Condition()
    self._slots = threading.Semaphore(max_parallelism)
    self._executor = (concurrent.futures.ThreadPoolExecutor(
        max_parallelism, thread_name_prefix='batched-handler')
                      if max_parallelism > 1 else None)
    self._dispatcher = threading.Thread(
        target=self._dispatch_forever, daemon=True,
        name=f'batcher {getattr(fn, "__qualname__", fn)}')
    self._dispatcher.start()
    # Made by a node of a launched program: its threads end with it.
    context.close_at_stop(self.close)

  def close(self) -> None:
    """Ends the dispatcher thread and the handler threads (after the
    batches running); calls pending or made later raise."""
    with self._cond:
      self._closed = True
      pending, self._pending = self._pending, []
      self._cond.notify_all()
    for request in pending:
      request.future.set_exception(self._closed_error())
    if self._executor is not None:
      self._executor.shutdown(wait=False)

  def _closed_error(self) -> RuntimeError:
    return RuntimeError(f'batched_handler '
                        f'{getattr(self._fn, "__name__", self._fn)} is closed '
                        '(its program stopped).')

  def __call__(self, *args, **kwargs):
    request = _Request(args, kwargs)
    batch = None
    with self._cond:
      if self._closed:
        raise self._closed_error()
      self._pending.append(request)
      # The call that fills a batch runs it on its own thread (when a slot
      # is free): no hand-off to the dispatcher and back, which costs two
      # thread wake-ups per batch. Partial batches are the dispatcher's.
      if (len(self._pending) >= self._batch_size and
          self._slots.acquire(blocking=False)):
        batch = self._take_batch()
      else:
        self._cond.notify()
    if batch is not None:
      self._run(batch)
    return request.future.result()

  @property
  def batch_size(self) -> int:
    return self._batch_size

  @property
  def timeout(self) -> float:
    """Seconds after its first call a partial batch runs anyway."""
    return self._timeout

  def call_batch(self, calls: List[tuple]) -> List[Any]:
    """Runs up to `batch_size` calls (each a tuple of positional arguments)
    as one batch on this thread, once a running batch leaves a slot, and
    returns each call's result; raises what the batched call raised. For a
    server that gathers the calls itself (`launch.ChannelServer`)."""
    if not 1 <= len(calls) <= self._batch_size:
      raise ValueError(f'call_batch takes 1 to {self._batch_size} calls, got '
                       f'{len(calls)}.')
    with self._slots:
      return self._call_batched([(tuple(args), {}) for args in calls])

  def _next_batch(self) -> Optional[List[_Request]]:
    """Waits for a full batch, or for the oldest call's timeout; None once
    closed."""
    with self._cond:
      while True:
        while not self._pending:
          if self._closed:
            return None
          self._cond.wait()
        left = self._pending[0].arrival + self._timeout - time.monotonic()
        if len(self._pending) >= self._batch_size or left <= 0:
          return self._take_batch()
        self._cond.wait(left)

  def _take_batch(self) -> List[_Request]:
    """The oldest `batch_size` pending calls (hold `_cond`)."""
    batch = self._pending[:self._batch_size]
    del self._pending[:self._batch_size]
    return batch

  def _dispatch_forever(self) -> None:
    while True:
      batch = self._next_batch()
      if batch is None:
        return
      self._slots.acquire()
      if self._executor is None:
        self._run(batch)
        continue
      try:
        self._executor.submit(self._run, batch)
      except RuntimeError:  # Closed meanwhile.
        self._slots.release()
        for request in batch:
          request.future.set_exception(self._closed_error())
        return

  def _run(self, batch: List[_Request]) -> None:
    try:
      results = self._call_batched([(r.args, r.kwargs) for r in batch])
      for request, result in zip(batch, results):
        request.future.set_result(result)
    except BaseException as e:  # pylint: disable=broad-except
      for request in batch:
        if not request.future.done():
          request.future.set_exception(e)
    finally:
      self._slots.release()

  def _call_batched(self, calls: List[Tuple[tuple, dict]]) -> List[Any]:
    n = len(calls)
    if n > 1:
      try:
        for call in calls[1:]:
          _tree().assert_same_structure(calls[0], call)
      except (ValueError, TypeError) as e:
        raise ValueError(
            f'batched_handler {getattr(self._fn, "__name__", self._fn)}: '
            'calls in one batch must have arguments of the same structure: '
            f'{e}') from None
    if self._pad_batch and n < self._batch_size:
      calls = calls + [calls[-1]] * (self._batch_size - n)
    size = len(calls)
    args = tuple(_stack([c[0][i] for c in calls])
                 for i in range(len(calls[0][0])))
    kwargs = {k: _stack([c[1][k] for c in calls]) for k in calls[0][1]}
    output = self._fn(*args, **kwargs)

    def check(path, x):
      if np.ndim(x) == 0 or np.shape(x)[0] < n:
        raise ValueError(
            f'batched_handler {getattr(self._fn, "__name__", self._fn)} '
            f'returned a leaf at {path} of shape {np.shape(x)}; every leaf '
            f'must have the batch ({size}) as its leading dimension.')
    if isinstance(output, np.ndarray):  # The common case, without dm-tree.
      check((), output)
      return list(output[:n])
    tree = _tree()
    tree.map_structure_with_path(check, output)
    return [tree.map_structure(lambda x, i=i: x[i], output) for i in range(n)]


_SCALARS = (np.generic, int, float, bool)


def _numbers(value: Any) -> bool:
  """A list of numbers (`[x, x + 1]`): stacked whole, as Launchpad does."""
  return (isinstance(value, list) and bool(value) and
          all(isinstance(v, _SCALARS) for v in value))


def _stack(values: List[Any]) -> Any:
  """One argument of every call, stacked leaf-wise on a new leading axis
  (arrays and numbers directly: dm-tree costs more than the stacking).

  A list of numbers is one leaf, as under Launchpad: calls with `[x, x + 1]`
  give a `[B, 2]` array, whatever the batch's size `B`, so that a partial
  batch has the structure of a full one."""
  first = values[0]
  if isinstance(first, (np.ndarray,) + _SCALARS) or _numbers(first):
    if len(values) == 1:
      return np.array(first)[None]  # A copy, as np.stack makes.
    return np.stack(values)
  return _tree().map_structure(lambda *xs: np.stack(xs),
                               *[_numbers_as_arrays(v) for v in values])


def _numbers_as_arrays(value: Any) -> Any:
  """`value` with its lists of numbers as arrays (leaves for dm-tree)."""
  if _numbers(value):
    return np.asarray(value)
  if isinstance(value, dict):
    return {k: _numbers_as_arrays(v) for k, v in value.items()}
  if isinstance(value, tuple):
    items = [_numbers_as_arrays(v) for v in value]
    return type(value)(*items) if hasattr(value, '_fields') else tuple(items)
  if isinstance(value, list):
    return [_numbers_as_arrays(v) for v in value]
  return value


class _BatchedMethod:
  """A method descriptor: each instance gets its own `Batcher`."""

  def __init__(self, fn, batch_size, timeout, max_parallelism, pad_batch):
    functools.update_wrapper(self, fn)
    self._fn = fn
    self._config = (batch_size, timeout, max_parallelism, pad_batch)
    self._attr = f'_batcher_{fn.__name__}'
    self._lock = threading.Lock()

  def __set_name__(self, owner, name):
    self._attr = f'_batcher_{name}'

  def __get__(self, instance, owner=None):
    if instance is None:
      return self
    batcher = instance.__dict__.get(self._attr)
    if batcher is None:
      with self._lock:
        batcher = instance.__dict__.get(self._attr)
        if batcher is None:
          batcher = Batcher(self._fn.__get__(instance, owner), *self._config)
          instance.__dict__[self._attr] = batcher
    return batcher

  def __getstate__(self):
    state = self.__dict__.copy()
    del state['_lock']
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    self._lock = threading.Lock()


_DEFAULT_TIMEOUT = datetime.timedelta(milliseconds=200)


def batched_handler(
    batch_size: int,
    max_parallelism: int = 1,
    timeout: Union[datetime.timedelta, float] = _DEFAULT_TIMEOUT,
    pad_batch: bool = False) -> Callable[[Callable], Any]:
  """Makes concurrent calls of a CourierNode method run as one batched call.

  Each call passes one example; the wrapped method receives every argument
  stacked tree-wise (`np.stack`) along a new leading batch dimension and
  returns a nest whose leaves have the batch as leading dimension; each
  caller gets its own row back. Use it as Launchpad documents, wrapping the
  bound method in `__init__`::

    def __init__(self):
      self.compute = launch.batched_handler(batch_size=8)(self.compute)

  or as a decorator of the method in the class body.

  Args:
    batch_size: the largest batch; a full batch runs at once.
    max_parallelism: how many batches may run at the same time.
    timeout: how long after the first call of a batch arrived a partial
      batch runs anyway: a `datetime.timedelta` (as in Launchpad; default
      200 ms) or seconds.
    pad_batch: pad partial batches to `batch_size` (repeating the last call)
      so that the wrapped method always sees the same shape.
  """
  if (not isinstance(batch_size, int) or isinstance(batch_size, bool) or
      batch_size < 1):
    raise ValueError(f'batch_size must be a positive int, got {batch_size!r}.')
  if isinstance(timeout, datetime.timedelta):
    seconds = timeout.total_seconds()
  elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
    seconds = float(timeout)
  else:
    raise ValueError('timeout must be a datetime.timedelta or seconds, got '
                     f'{timeout!r}.')
  if seconds < 0:
    raise ValueError(f'timeout must be >= 0, got {timeout!r}.')
  if (not isinstance(max_parallelism, int) or isinstance(max_parallelism, bool)
      or max_parallelism < 1):
    raise ValueError('max_parallelism must be a positive int, got '
                     f'{max_parallelism!r}.')

  def decorator(fn):
    if not callable(fn):
      raise TypeError(f'batched_handler wraps a callable, got {fn!r}.')
    if inspect.isfunction(fn) and _first_arg(fn) == 'self':
      # A method in a class body: one batcher per instance.
      return _BatchedMethod(fn, batch_size, seconds, max_parallelism,
                            bool(pad_batch))
    # A bound method (Launchpad's way, in __init__) or a plain callable.
    batcher = Batcher(fn, batch_size, seconds, max_parallelism,
                      bool(pad_batch))
    functools.update_wrapper(batcher, fn, updated=())
    return batcher
  return decorator


def _first_arg(fn) -> str:
  try:
    params = list(inspect.signature(fn).parameters)
  except (TypeError, ValueError):
    return ''
  return params[0] if params else ''
