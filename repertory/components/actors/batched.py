"""The actor node of on-policy agents: a batch of environments, one policy
call per step, experience written through an adder."""

from typing import Any, Optional

from repertory import core
from repertory import launch
from repertory.components.evaluation import episodes


class BatchedActor(core.Worker):
  """Steps a batch of environments until the program stops.

  Each step: one `policy.act(observations [N, ...])` call, one batched
  environment step, one `adder.add` tagged with the policy version that
  chose the actions, then `policy.update()` (a non-blocking weight refresh).
  Every `report_every` steps the actor steps and finished episodes go to the
  counter and the run monitor (`evaluation.ActorReporter`).

  Example::

    policy = actors.FeedForwardActor(network, learner, greedy=False)
    adder = adders.UnrollAdder(replay, 'queue', 20, num_envs=8)
    actor = actors.BatchedActor(environments.make_batched('catch', 8),
                                policy, adder, counter, monitor,
                                report_every=20)
    actor.run()      # In a PyClassNode: until launch.stop().

  Args:
    environment: a batched, auto-resetting environment
      (`environments.make_batched`); the actor closes it when it stops.
    policy: has `act(observations) -> actions` (or `(actions, extras)`,
      whose extras go to `adder.add(..., extras=extras)`), `update(wait)`
      and `version`; e.g. a `FeedForwardActor`.
    adder: has `add_first`, `add` and `set_policy_version` (e.g.
      `adders.UnrollAdder`); None writes nothing.
    counter: the counter (handle) that gets `actor_steps`, or None.
    monitor: the run monitor (handle) that gets finished episodes, or None.
    report_every: batched steps between reports (e.g. the unroll length:
      once per item written).
  """

  def __init__(self,
               environment: Any,
               policy: Any,
               adder: Any = None,
               counter: Any = None,
               monitor: Any = None,
               report_every: int = 20):
    if report_every < 1:
      raise ValueError(f'report_every must be >= 1, got {report_every}.')
    self._environment = environment
    self._policy = policy
    self._adder = adder
    self._num_envs = environment.num_envs
    self._episodes = episodes.EpisodeTracker(self._num_envs)
    self._reporter = episodes.ActorReporter(counter, monitor)
    self._report_every = report_every
    self._timestep = None
    self.steps = 0  # Batched steps taken.

  def run(self, num_steps: Optional[int] = None) -> None:
    """Acts until the program stops, or for `num_steps` more batched steps
    (then it can be called again and continues where it stopped)."""
    stop = launch.stop_event() if num_steps is None else None
    try:
      self._act(stop, num_steps)
    except Exception:  # pylint: disable=broad-except
      if stop is None or not stop.is_set():
        raise  # Reverb or the learner going away while stopping is expected.
    finally:
      if num_steps is None:
        self.close()

  def close(self) -> None:
    self._environment.close()
    if hasattr(self._policy, 'close'):
      self._policy.close()

  def _act(self, stop, num_steps: Optional[int]) -> None:
    if self._timestep is None:
      self._policy.update(wait=True)
      self._timestep = self._environment.reset()
      if self._adder is not None:
        self._adder.add_first(self._timestep)
    end = None if num_steps is None else self.steps + num_steps
    while (stop is None or not stop.is_set()) and (
        end is None or self.steps < end) and self._reporter.acquire(
            self._num_envs):
      if self._adder is not None:
        self._adder.set_policy_version(self._policy.version)
      action, extras = self._policy.act(self._timestep.observation), ()
      if isinstance(action, tuple):
        action, extras = action
      self._timestep = self._environment.step(action)
      if self._adder is not None:
        self._adder.add(action, self._timestep, extras=extras)
      self._episodes.observe(self._timestep.step_type, self._timestep.reward)
      self.steps += 1
      if self.steps % self._report_every == 0:
        self._reporter.report(self._report_every * self._num_envs,
                              *self._episodes.pop())
      self._policy.update()
    if end is None:  # Stopping: report what the last partial period did.
      self._reporter.report(
          (self.steps % self._report_every) * self._num_envs,
          *self._episodes.pop())
