"""The actor node of replay agents (Ape-X, R2D2): what their actors share
around their own `step()`."""

from typing import Any, List

import numpy as np

from repertory import core
from repertory import launch
from repertory.components import evaluation

# Actors report their steps and episodes once per this many policy calls.
REPORT_EVERY_CALLS = 50


def constant_priority(value: float, item) -> float:
  """A priority function that ignores the item."""
  del item
  return value


class ReplayActor(core.Worker):
  """What the Ape-X and R2D2 actors share: weight fetches (tagging the
  adders' items with the policy version), episode bookkeeping, batched
  reports to the counter and monitor (`ActorReporter`), the run loop and
  shutdown. Subclasses set `_client`, `_policy` (a `GraphFunction`),
  `_adders` and `_epsilon`,
  call `_start_bookkeeping` and implement `step()` (calling
  `_record_step`, `_end_episode` and `_after_call`)."""

  def _start_bookkeeping(self, num_envs: int, counter: Any,
                         monitor: Any) -> None:
    self._reporter = evaluation.ActorReporter(counter, monitor)
    self._returns = np.zeros(num_envs)
    self._lengths = np.zeros(num_envs, np.int64)
    self._done_returns: List[float] = []
    self._done_lengths: List[int] = []
    self._pending_steps = 0
    self._calls = 0

  @property
  def epsilon(self) -> float:
    return self._epsilon

  def _fetch_weights(self, wait: bool) -> None:
    version = self._client.version
    self._client.update(wait=wait)
    if self._client.version != version:
      self._policy.set_weights(self._client.params)
      for adder in self._adders:
        adder.set_policy_version(self._client.version)

  def _record_step(self, j: int, reward: Any) -> None:
    self._returns[j] += float(reward or 0.0)
    self._lengths[j] += 1

  def _end_episode(self, j: int) -> None:
    self._done_returns.append(float(self._returns[j]))
    self._done_lengths.append(int(self._lengths[j]))
    self._returns[j], self._lengths[j] = 0.0, 0

  def _after_call(self, num_steps: int) -> None:
    """Counts one policy call of `num_steps` steps; reports every
    `REPORT_EVERY_CALLS` calls; fetches new weights if due."""
    self._pending_steps += num_steps
    self._calls += 1
    if self._calls % REPORT_EVERY_CALLS == 0:
      self.report()
    self._fetch_weights(wait=False)

  def report(self) -> None:
    """Sends the pending step count and finished episodes (futures)."""
    self._reporter.report(self._pending_steps, self._done_returns,
                          self._done_lengths)
    self._pending_steps = 0
    self._done_returns, self._done_lengths = [], []

  def flush(self) -> None:
    """Sends every item created so far to the table (blocks)."""
    for adder in self._adders:
      adder.flush()

  def run(self) -> None:
    stop = launch.stop_event()
    try:
      while not stop.is_set():
        self.step()
    finally:
      self.close()

  def close(self) -> None:
    self._client.close()
    for adder in self._adders:
      try:
        adder.close()
      except Exception:  # pylint: disable=broad-except
        pass  # The server may already be gone at shutdown.
