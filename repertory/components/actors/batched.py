"""The actor node of batched agents: a batch of environments, one
`core.Policy` step per batched step, experience written through an adder.

This module must not import TensorFlow: SEED's environment-only actors run
it with a policy that asks the inference server.
"""

from typing import Any, Optional

from repertory import core
from repertory import launch
from repertory.components.evaluation import episodes


class BatchedActor(core.Worker):
  """Steps a batch of environments with a `core.Policy` until the program
  stops.

  Each batched step: `policy.step(observation [N, ...], state, first [N])`
  (after `policy.observe_timestep(timestep)` if the policy has that), one
  environment step, one `adder.add(action, timestep, extras=extras)` (with
  `core_state=state`, the state the step started from, for a recurrent
  policy) tagged with the policy version that chose the actions, then a
  non-blocking weight refresh. Every `report_every` steps the actor steps
  and finished episodes go to the counter and the run monitor
  (`evaluation.ActorReporter`).

  Example (IMPALA's actor)::

    policy = actor_critic.networks.Policy(config, obs_spec, action_spec)
    client = variables.VariableClient(learner, 'policy')
    adder = adders.UnrollAdder(replay, 'queue', 20, num_envs=8)
    actor = actors.BatchedActor(environments.make_batched('catch', 8),
                                policy, adder, counter, monitor,
                                report_every=20, variable_client=client)
    actor.run()      # In a PyClassNode: until launch.stop().

  Args:
    environment: a batched, auto-resetting environment
      (`environments.make_batched`); the actor closes it when it stops.
    policy: a `core.Policy`. Its weights come from `variable_client`; without
      one, a policy with `update(wait)` and `version` refreshes itself
      (`FeedForwardActor`), any other keeps its weights (SEED's server
      policy, whose server holds them).
    adder: has `add_first`, `add` and `set_policy_version` (e.g.
      `adders.UnrollAdder`); None writes nothing.
    counter: the counter (handle) that gets `actor_steps`, or None.
    monitor: the run monitor (handle) that gets finished episodes, or None.
    report_every: batched steps between reports (e.g. the unroll length:
      once per item written).
    variable_client: a `VariableClient` of the learner (`update(wait)`,
      `version`, `params`); the policy gets `set_weights(params)` on every
      new version. The actor closes it when it stops.
    min_report_interval_s: reports are sent at most this often
      (`ActorReporter(min_interval_s=...)`); the rest on stop.
  """

  def __init__(self,
               environment: Any,
               policy: core.Policy,
               adder: Any = None,
               counter: Any = None,
               monitor: Any = None,
               report_every: int = 20,
               variable_client: Any = None,
               min_report_interval_s: float = 0.0):
    if report_every < 1:
      raise ValueError(f'report_every must be >= 1, got {report_every}.')
    self._environment = environment
    self._policy = policy
    self._adder = adder
    self._client = variable_client
    self._num_envs = environment.num_envs
    self._episodes = episodes.EpisodeTracker(self._num_envs)
    self._reporter = episodes.ActorReporter(
        counter, monitor, min_interval_s=min_report_interval_s)
    self._report_every = report_every
    self._observe = getattr(policy, 'observe_timestep', None)
    self._self_refreshing = variable_client is None and hasattr(
        policy, 'update')
    self._version = -1
    self._timestep = None
    self._state = None
    self._recurrent = False
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
    if self._client is not None:
      self._client.close()
    if hasattr(self._policy, 'close'):
      self._policy.close()

  def _refresh_weights(self, wait: bool = False) -> None:
    """Fetches new weights if due (the adder is tagged in `_tag`)."""
    if self._client is not None:
      self._client.update(wait=wait)
      if self._client.version != self._version:
        self._policy.set_weights(self._client.params)
        self._set_version(self._client.version)
    elif self._self_refreshing:
      self._policy.update(wait=wait)

  def _tag(self) -> None:
    """Tags the next step with a self-refreshing policy's version."""
    if self._self_refreshing and self._policy.version != self._version:
      self._set_version(self._policy.version)

  def _set_version(self, version: int) -> None:
    self._version = version
    if self._adder is not None:
      self._adder.set_policy_version(version)

  def _start(self) -> None:
    self._refresh_weights(wait=True)
    self._timestep = self._environment.reset()
    if self._adder is not None:
      self._adder.add_first(self._timestep)
    self._episodes.observe(self._timestep.step_type, self._timestep.reward)
    self._state = self._policy.initial_state(self._num_envs)
    self._recurrent = not (isinstance(self._state, tuple) and
                           not self._state)

  def collect(self, num_steps: int) -> None:
    """Takes exactly `num_steps` batched steps now, outside the step budget,
    without reports or weight refreshes (round-based actors, PPO's and
    A3C's, set the weights, then `collect`, then `report`)."""
    if self._timestep is None:
      self._start()
    for _ in range(num_steps):
      self._step()

  def report(self, num_steps: int) -> None:
    """Reports `num_steps` batched steps and the episodes finished since the
    last report."""
    self._reporter.report(num_steps * self._num_envs, *self._episodes.pop())

  def _step(self) -> None:
    """One batched step: policy, environments, adder, episodes."""
    timestep, state = self._timestep, self._state
    self._tag()
    if self._observe is not None:
      self._observe(timestep)
    action, extras, next_state = self._policy.step(
        timestep.observation, state, timestep.first())
    timestep = self._environment.step(action)
    if self._adder is not None:
      if self._recurrent:
        self._adder.add(action, timestep, extras=extras, core_state=state)
      else:
        self._adder.add(action, timestep, extras=extras)
    self._timestep, self._state = timestep, next_state
    self._episodes.observe(timestep.step_type, timestep.reward)
    self.steps += 1

  def _act(self, stop, num_steps: Optional[int]) -> None:
    if self._timestep is None:
      self._start()
    end = None if num_steps is None else self.steps + num_steps
    every = self._report_every
    while (stop is None or not stop.is_set()) and (
        end is None or self.steps < end) and self._reporter.acquire(
            self._num_envs):
      self._step()
      self._reporter.add_episodes(*self._episodes.pop())
      if self.steps % every == 0:
        self.report(every)
      self._refresh_weights()
    if end is None:  # Stopping: report what the last partial period did.
      self.report(self.steps % every)
    self._reporter.flush()
