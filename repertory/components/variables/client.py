"""The actor side of versioned weights: a periodic, asynchronous fetcher."""

import concurrent.futures
import functools
import queue
import threading
import time
import weakref
from typing import Any, Callable, Dict, Optional, Sequence, Union

from absl import logging

from repertory import core
from repertory import launch


class VariableClient:
  """Keeps a local copy of named variable groups from a `VariableSource`.

  `source` is anything with `get_variables(names)` returning
  `(version, [nest per name])`: a local `VariableStore`, a learner, or a
  launch CourierNode client proxy of one.

  `update()` is called once per actor step. Every `update_period` calls (or
  every `update_period_s` seconds, whichever comes first when both are set) it
  starts a fetch in a background thread and returns immediately; the fetched
  weights replace the local ones on a later `update()` call, once the fetch
  has finished. The actor loop therefore never waits for the network.
  `update(wait=True)` fetches and blocks; `wait_for_version(v)` blocks until
  weights of version >= v are held (synchronous algorithms such as PPO).

  With `transport='tcp'` the fetches go over a direct TCP connection to the
  source's `variables_channel_address()` (a `VariableStore`'s, which the
  learners serve) instead of through the source itself: across processes
  that is a Ray call, far slower (BENCHMARKS.md). The weights
  travel only when their version changed; a broken connection (a restarted
  learner) is opened again once per fetch.

  With `asynchronous=False` (a source in this process) every fetch runs on
  the caller's thread instead. Otherwise, over tcp, a due `update()` sends
  the request and a later one reads the reply once it has arrived, both on
  the caller's thread (a thread to wait on the socket cost more in
  hand-offs than the fetch); through the handle, fetches run on one daemon
  thread per client, started on the first fetch and ended by `close()` or
  when the client is garbage-collected (a blocked fetch never keeps the
  process alive at exit). One thread, not one per fetch: Ray records a task
  event for the first calls from every new thread, so a thread per fetch
  would fill Ray's GCS steadily.

  Example::

    client = VariableClient(learner, ['policy'], update_period=100)
    client.update(wait=True)
    weights = client.params          # the 'policy' nest
    adder.set_policy_version(client.version)
  """

  def __init__(self,
               source: Any,
               names: Union[str, Sequence[str]],
               update_period: int = 1,
               update_period_s: Optional[float] = None,
               asynchronous: Optional[bool] = None,
               fetch_timeout_s: float = 60.0,
               transport: str = 'handle'):
    """Creates the client (fetches nothing yet; call `update(wait=True)`).

    Args:
      source: an object with `get_variables(names)`.
      names: the variable group name(s) to fetch.
      update_period: fetch every this many `update()` calls (>= 1).
      update_period_s: if set, also fetch when this many seconds have passed
        since the last fetch started.
      asynchronous: if False, every fetch runs on the calling thread and
        blocks it (no fetch thread): for a source in this process that
        answers at once (a `VariableStore`, a learner colocated with the
        caller), whose fetches would otherwise cost more in hand-offs
        between the two threads than the fetch itself. None (the default):
        False for a source whose class says it answers at once
        (`ANSWERS_AT_ONCE = True`: a league's frozen snapshot), else True.
      fetch_timeout_s: how long a blocking fetch may take before a
        `TimeoutError` naming the source is raised (a fetch thread's: one
        on the calling thread returns when the source answers).
      transport: 'handle' (`source.get_variables`) or 'tcp' (see above).
    """
    if transport not in launch.TRANSPORTS:
      raise ValueError(f'VariableClient transport={transport!r}; choose one '
                       f'of {launch.TRANSPORTS}.')
    if not hasattr(source, 'get_variables'):
      raise TypeError(
          f'VariableClient source {source!r} has no get_variables(names); pass '
          'a VariableStore, a learner or a CourierNode handle (dereferenced, '
          'i.e. the client proxy the node received).')
    if update_period < 1:
      raise ValueError(f'update_period must be >= 1, got {update_period}.')
    if update_period_s is not None and update_period_s <= 0:
      raise ValueError(
          f'update_period_s must be positive or None, got {update_period_s}.')
    self._source = source
    self._transport = transport
    self._names = [names] if isinstance(names, str) else list(names)
    if not self._names:
      raise ValueError('VariableClient needs at least one variable name.')
    self._update_period = update_period
    self._update_period_s = update_period_s
    if asynchronous is None:  # The class's: a handle answers any attribute.
      asynchronous = getattr(type(source), 'ANSWERS_AT_ONCE', False) is not True
    self._asynchronous = asynchronous
    self._fetch_timeout_s = fetch_timeout_s
    self._future: Optional[concurrent.futures.Future] = None
    self._requests: Optional[queue.Queue] = None  # To the fetch thread.
    self._fetch: Optional[Callable[[], Any]] = None  # Without a thread.
    self._calls = 0
    self._last_fetch_time = -float('inf')
    self._lock = threading.Lock()
    self._version = -1
    self._variables: Dict[str, core.Nest] = {}

  # --- what the actor reads -------------------------------------------------

  @property
  def version(self) -> int:
    """The policy version of the weights held (-1 before the first fetch)."""
    return self._version

  @property
  def variables(self) -> Dict[str, core.Nest]:
    """The weights held, {name: nest}."""
    return self._variables

  @property
  def params(self) -> core.Nest:
    """The weights of the single group when one name was requested."""
    if len(self._names) != 1:
      raise ValueError(
          f'params is ambiguous with several names {self._names}; use '
          'client.variables[name].')
    if not self._variables:
      raise RuntimeError(
          'VariableClient holds no weights yet; call update(wait=True) first.')
    return self._variables[self._names[0]]

  # --- fetching -------------------------------------------------------------

  def _apply(self, result) -> None:
    version, variables = result
    if len(variables) != len(self._names):
      raise ValueError(
          f'Source returned {len(variables)} groups for names {self._names}.')
    with self._lock:
      if version >= self._version:
        self._version = version
        self._variables = dict(zip(self._names, variables))

  def _collect(self, block: bool) -> None:
    """Applies a finished (or, if block, the in-flight) fetch."""
    future = self._future
    if future is None:
      return
    if not block and not future.done():
      return
    try:
      result = future.result(timeout=self._fetch_timeout_s)
    except concurrent.futures.TimeoutError as e:
      raise TimeoutError(
          f'VariableClient: fetching {self._names} from {self._source!r} took '
          f'more than {self._fetch_timeout_s}s.') from e
    finally:
      if future.done():
        self._future = None
    self._apply(result)

  def _make_fetch(self) -> Callable[[], Any]:
    return (_ChannelFetch(self._source, list(self._names))
            if self._transport == 'tcp' else
            functools.partial(self._source.get_variables, list(self._names)))

  def _fetcher(self) -> Callable[[], Any]:
    """The fetch made on the calling thread (made at the first)."""
    if self._fetch is None:
      self._fetch = self._make_fetch()
    return self._fetch

  def _fetch_here(self) -> None:
    """A fetch on the calling thread, waiting for it (`asynchronous=False`,
    and `update(wait=True)` over tcp)."""
    self._last_fetch_time = time.monotonic()
    self._apply_fetched(self._fetcher()())

  def _start_fetch(self) -> None:
    self._last_fetch_time = time.monotonic()
    future = concurrent.futures.Future()
    if self._requests is None:
      self._requests = queue.Queue()
      # The thread holds the source, not the client: a client that is
      # garbage-collected (without close()) ends its thread.
      threading.Thread(target=_serve_fetches,
                       args=(self._make_fetch(), self._requests),
                       daemon=True, name='variable_client_fetch').start()
      weakref.finalize(self, self._requests.put, None)
      # Made by a node of a launched program: the thread ends with it.
      launch.close_at_stop(self.close)
    self._requests.put(future)
    self._future = future

  def update(self, wait: bool = False) -> None:
    """Counts a call and fetches when a period has elapsed.

    Args:
      wait: fetch now and block until the newest weights are held.
    """
    if not self._asynchronous:
      self._calls += 1
      if wait or self._due():
        self._calls = 0
        self._fetch_here()
      return
    if self._transport == 'tcp':
      self._update_over_channel(wait)
      return
    if wait:
      self._collect(block=True)
      self._start_fetch()
      self._collect(block=True)
      self._calls = 0
      return
    self._collect(block=False)
    self._calls += 1
    if self._due() and self._future is None:
      self._calls = 0
      self._start_fetch()

  def _update_over_channel(self, wait: bool) -> None:
    """`update` with the tcp transport: the request is sent on a due call
    and its reply read on a later one, once it has arrived (no thread:
    hand-offs to one cost more than the fetch)."""
    fetch = self._fetcher()
    if fetch.in_flight and (wait or fetch.ready()):
      result = fetch.finish()
      if result is not None:
        self._apply_fetched(result)
    if wait:
      self._calls = 0
      self._fetch_here()
      return
    self._calls += 1
    if self._due() and not fetch.in_flight:
      self._calls = 0
      self._last_fetch_time = time.monotonic()
      fetch.start()

  def _apply_fetched(self, result) -> None:
    self._apply((int(result[0]), list(result[1])))

  def _due(self) -> bool:
    """Whether a period has elapsed (counted calls or seconds)."""
    return self._calls >= self._update_period or (
        self._update_period_s is not None and
        time.monotonic() - self._last_fetch_time >= self._update_period_s)

  def update_and_wait(self) -> None:
    """Fetches and blocks (Acme's name for `update(wait=True)`)."""
    self.update(wait=True)

  def wait_for_version(self,
                       version: int,
                       timeout_s: float = 60.0,
                       poll_interval_s: float = 0.01) -> int:
    """Blocks until weights of version >= `version` are held; returns it.

    Raises:
      TimeoutError: naming the version waited for and the one held.
    """
    deadline = time.monotonic() + timeout_s
    next_log = time.monotonic() + 10.0
    while True:
      self.update(wait=True)
      if self._version >= version:
        return self._version
      now = time.monotonic()
      if now >= deadline:
        raise TimeoutError(
            f'VariableClient: waited {timeout_s}s for version {version} of '
            f'{self._names}; the source still serves {self._version}.')
      if now >= next_log:
        logging.info('VariableClient waiting for version %d of %s (have %d).',
                     version, self._names, self._version)
        next_log = now + 10.0
      time.sleep(poll_interval_s)

  def close(self) -> None:
    """Forgets any fetch in flight and ends the fetch thread (after the
    fetch in flight, if any)."""
    self._future = None
    if self._requests is not None:
      self._requests.put(None)
      self._requests = None
    if isinstance(self._fetch, _ChannelFetch):
      self._fetch.close()
    self._fetch = None


class _ChannelFetch:
  """`get_variables(names)` over the source's TCP channel; weights travel
  only when their version changed since this fetcher's last result.

  Called, it fetches and waits (opening the connection again once if it
  broke). `start()` sends the request and returns; `ready()` tells whether
  the reply has begun to arrive and `finish()` reads it, so that the caller
  steps meanwhile without a thread.
  """

  def __init__(self, source: Any, names: Sequence[str]):
    self._source = source
    self._names = names
    self._channel: Optional[launch.ChannelClient] = None
    self._last = None
    self.in_flight = False

  def __call__(self) -> Any:
    for attempt in range(2):
      try:
        self._send()
        return self._receive()
      except (ConnectionError, OSError):
        self.close()  # A restarted source serves on a new address.
        if attempt:
          raise

  def start(self) -> None:
    """Sends the request (reconnecting once if the connection broke)."""
    try:
      self._send()
    except (ConnectionError, OSError):
      self.close()
      self._send()  # A restarted source serves on a new address.

  def ready(self) -> bool:
    """Whether the reply of the request in flight has begun to arrive."""
    return self._channel.reply_ready()

  def finish(self) -> Optional[Any]:
    """The reply of `start()`'s request (waiting for it), or None if the
    connection broke meanwhile: it is closed, and the next `start()` opens
    a new one."""
    try:
      return self._receive()
    except (ConnectionError, OSError):
      self.close()
      return None

  def _send(self) -> None:
    if self._channel is None:
      self._channel = launch.ChannelClient(
          self._source.variables_channel_address())
      self._last = None  # A new source may hold other weights.
    version = -1 if self._last is None else self._last[0]
    self._channel.send(self._names, version)
    self.in_flight = True

  def _receive(self) -> Any:
    result = self._channel.receive()
    self.in_flight = False
    if result is not None:
      self._last = result
    return self._last

  def close(self) -> None:
    self.in_flight = False
    if self._channel is not None:
      self._channel.close()
      self._channel = None


def _serve_fetches(fetch: Callable[[], Any], requests: queue.Queue) -> None:
  """The fetch thread: answers each requested future until a None."""
  try:
    while True:
      future = requests.get()
      if future is None:
        return
      try:
        result = fetch()
        future.set_result((int(result[0]), list(result[1])))
      except BaseException as e:  # pylint: disable=broad-except
        future.set_exception(e)
  finally:
    if isinstance(fetch, _ChannelFetch):
      fetch.close()
