"""IMPALA's actor node: a batched actor that writes unrolls (the evaluation
actor is `components.actor_critic.acting.EvalActor`).

The actor node holds a local copy of the policy, steps `envs_per_actor`
environments with one policy call per step, writes `[T + 1]` unrolls with
behaviour logits (and the LSTM state) through `UnrollAdder` into the Reverb
queue, and refreshes its weights from the learner every
`variable_update_period` steps through a `VariableClient`.
"""

from typing import Any, Optional

import numpy as np

from repertory import core
from repertory import launch
from repertory.components.actor_critic import config as config_lib
from repertory.components.actor_critic import networks as networks_lib
from repertory.components import variables
from repertory.components.actors import limit_tf_threads
from repertory.components.evaluation import episodes


class ImpalaActor(core.Worker):
  """An actor node of IMPALA: `run()` acts until the program stops."""

  def __init__(self,
               actor_id: int,
               config: config_lib.ActorCriticConfig,
               env_spec: str,
               num_envs: int,
               seed: int,
               learner: Any,
               replay: Any,
               table: str,
               counter: Any = None,
               monitor: Any = None):
    """Builds the environments, the policy, the variable client and adder.

    Args:
      actor_id: this actor's index (recorded in every unroll).
      config: the agent's `Config`.
      env_spec: an environment spec for `repertory.environments`.
      num_envs: environments stepped per policy call.
      seed: environment i gets seed + i; also seeds action sampling.
      learner: the variable source (the learner's handle, dereferenced).
      replay: a `reverb.Client` of the queue's server.
      table: the queue's name.
      counter: optional counter client (actor_steps).
      monitor: optional run monitor client (finished episodes).
    """
    limit_tf_threads()
    from repertory import environments  # pylint: disable=g-import-not-at-top
    from repertory.components import adders  # pylint: disable=g-import-not-at-top
    self._actor_id = actor_id
    self._config = config
    self._num_envs = num_envs
    self._env = environments.make_batched(
        env_spec, num_envs, seed=seed,
        kind=config_lib.batched_env_kind(config.batched_env_kind, env_spec))
    observation_spec = self._env.observation_spec()
    action_spec = self._env.action_spec()
    self._policy = networks_lib.Policy(config, observation_spec, action_spec,
                                       seed=seed)
    self._client = variables.VariableClient(
        learner, networks_lib.POLICY,
        update_period=config.variable_update_period,
        transport=config.weights_transport)
    num_actions = networks_lib.num_actions(action_spec)
    self._adder = adders.UnrollAdder(
        replay, table, unroll_length=config.unroll_length, num_envs=num_envs,
        actor_id=actor_id,
        environment_spec=adders.EnvironmentSpec(
            observation_spec, action_spec, None, None),
        extras_spec={'logits': np.zeros((num_actions,), np.float32)},
        core_state_spec=networks_lib.state_spec(config))
    self._reporter = episodes.ActorReporter(
        counter, monitor, min_interval_s=episodes.REPORT_INTERVAL_S)
    self._episodes = episodes.EpisodeTracker(num_envs)
    self._version = -1
    self._timestep = None
    self._state = None
    self.steps = 0

  def _refresh_weights(self, wait: bool = False) -> None:
    self._client.update(wait=wait)
    if self._client.version != self._version:
      self._policy.set_weights(self._client.params)
      self._version = self._client.version
      self._adder.set_policy_version(self._version)

  def run(self, num_steps: Optional[int] = None) -> None:
    """Acts until the program stops, or for `num_steps` more batched steps
    (then it can be called again and continues where it stopped)."""
    stop = launch.stop_event() if num_steps is None else None
    try:
      self._act(stop, num_steps)
    except Exception:  # pylint: disable=broad-except
      if stop is not None and stop.is_set():
        return  # Reverb or the learner went away while stopping: expected.
      raise
    finally:
      if num_steps is None:
        self.close()

  def close(self) -> None:
    self._env.close()
    self._client.close()

  def _act(self, stop, num_steps: Optional[int]) -> None:
    if self._timestep is None:
      self._refresh_weights(wait=True)
      self._timestep = self._env.reset()
      self._adder.add_first(self._timestep)
      self._episodes.observe(self._timestep.step_type, self._timestep.reward)
      self._state = self._policy.initial_state(self._num_envs)
    timestep, state = self._timestep, self._state
    end = None if num_steps is None else self.steps + num_steps
    unroll = self._config.unroll_length
    while (stop is None or not stop.is_set()) and (
        end is None or self.steps < end):
      action, extras, next_state = self._policy.step(
          timestep.observation, state, timestep.first())
      timestep = self._env.step(action)
      self._adder.add(action, timestep, extras=extras,
                      core_state=state if self._policy.recurrent else None)
      state = next_state
      self._episodes.observe(timestep.step_type, timestep.reward)
      self.steps += 1
      if self.steps % unroll == 0:
        self._reporter.report(unroll * self._num_envs, *self._episodes.pop())
      self._refresh_weights()
    self._timestep, self._state = timestep, state
    if end is None:  # Stopping: report what the last partial unroll did.
      self._reporter.report((self.steps % unroll) * self._num_envs,
                            *self._episodes.pop())
    self._reporter.flush()
