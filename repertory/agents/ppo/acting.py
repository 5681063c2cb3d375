"""PPO acting: one round of exactly `unroll_length` batched steps per version.

The actor waits (on the learner) for the round's policy version, fetches its
weights, steps its `envs_per_actor` environments `unroll_length` times with
one policy call per step, and writes one unroll per environment (with the
behaviour log-probs and values) to the queue through `UnrollAdder`. It then
waits for the next version: no step is ever taken with a policy other than
the round's.

The evaluation actor is `components.actor_critic.mlp_policy.EvalActor`.
"""

import time
from typing import Any, Optional

from absl import logging
import numpy as np

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components.actors import limit_tf_threads
from repertory.agents.ppo import config as config_lib
from repertory.components.actor_critic import mlp_policy as networks_lib
from repertory.components import adders
from repertory.components import variables
from repertory.components.evaluation import episodes

# The queue of unrolls between PPO actors and learner.
QUEUE = 'queue'
# How long one blocking call may hold the learner while an actor waits for a
# version; the actor repeats it until `round_timeout_s` has passed.
WAIT_SLICE_S = 2.0


def extras_spec() -> dict:
  """The per-step extras PPO actors write: behaviour log-prob and value."""
  return {'log_prob': np.zeros((), np.float32),
          'value': np.zeros((), np.float32)}


class PPOActor(core.Worker):
  """Collects one round of `unroll_length` steps per policy version."""

  def __init__(self,
               actor_id: int,
               config: config_lib.Config,
               env: str,
               envs_per_actor: int,
               seed: int,
               replay: Any,
               learner: Any,
               counter: Any = None,
               monitor: Any = None):
    """Builds the environments, the policy and the adder.

    Args:
      actor_id: this actor's index (recorded in its unrolls).
      config: PPO's `Config`.
      env: environment spec for `repertory.environments`.
      envs_per_actor: environments stepped per policy call.
      seed: seed of the first environment (the others follow) and of the
        action sampling.
      replay: a `reverb.Client` of the server holding the queue.
      learner: the learner (client): `get_variables`, `wait_for_version`.
      counter: optional counter (client): `increment(actor_steps=...)`.
      monitor: optional run monitor (client): `record_episodes(...)`.
    """
    limit_tf_threads()
    self._actor_id = actor_id
    self._config = config
    self._num_envs = envs_per_actor
    self._environment = environments.make_batched(env, envs_per_actor,
                                                  seed=seed)
    self._episodes = episodes.EpisodeTracker(envs_per_actor)
    observation_spec = self._environment.observation_spec()
    action_spec = self._environment.action_spec()
    self._policy = networks_lib.Policy(config.hidden_sizes, observation_spec,
                                       action_spec, seed=seed)
    self._learner = learner
    self._client = variables.VariableClient(
        learner, networks_lib.POLICY, fetch_timeout_s=config.round_timeout_s)
    self._adder = adders.UnrollAdder(
        replay, QUEUE, unroll_length=config.unroll_length,
        num_envs=envs_per_actor, actor_id=actor_id,
        environment_spec=adders.EnvironmentSpec(
            observation_spec, action_spec, None, None),
        extras_spec=extras_spec())
    self._reporter = episodes.ActorReporter(counter, monitor)
    self._timestep = None
    self._version: Optional[int] = None

  @property
  def version(self) -> Optional[int]:
    """The version of the last round collected (None before the first)."""
    return self._version

  def wait_for_round(self, version: Optional[int], stop=None) -> Optional[int]:
    """Waits until the learner serves `version`, then holds its weights.

    `version` None takes the learner's current version (the first round).
    Returns the version held, or None if `stop` was set while waiting.

    Raises:
      TimeoutError: naming the version after `round_timeout_s`.
      RuntimeError: if the learner serves another version than asked for
        (the rounds are out of step).
    """
    if version is not None:
      start = time.monotonic()
      while True:
        served = self._learner.wait_for_version(version, WAIT_SLICE_S)
        if served >= version:
          break
        if stop is not None and stop.is_set():
          return None
        waited = time.monotonic() - start
        if waited >= self._config.round_timeout_s:
          raise TimeoutError(
              f'PPO actor {self._actor_id}: waited {waited:.0f}s for the '
              f'learner to publish version {version}; it still serves '
              f'{served}. Is the learner stuck waiting for another actor?')
        logging.log_every_n_seconds(
            logging.INFO, 'PPO actor %d waiting for version %d (learner at '
            '%d).', 10, self._actor_id, version, served)
    self._client.update(wait=True)
    held = self._client.version
    if version is not None and held != version:
      raise RuntimeError(
          f'PPO actor {self._actor_id} waited for version {version} but the '
          f'learner serves {held}: the synchronous rounds are out of step.')
    self._policy.set_weights(self._client.params)
    return held

  def collect_round(self, version: int) -> int:
    """Steps every environment `unroll_length` times with the held weights.

    Returns the number of environment steps taken.
    """
    if self._timestep is None:
      self._timestep = self._environment.reset()
      self._adder.add_first(self._timestep)
    self._adder.set_policy_version(version)
    timestep = self._timestep
    for _ in range(self._config.unroll_length):
      action, log_prob, value = self._policy.step(timestep.observation)
      timestep = self._environment.step(action)
      self._episodes.observe(timestep.step_type, timestep.reward)
      self._adder.add(action, timestep,
                      extras={'log_prob': log_prob, 'value': value})
    self._timestep = timestep
    self._adder.flush()  # The whole round is on the server before we wait.
    steps = self._config.unroll_length * self._num_envs
    self._reporter.report(steps, *self._episodes.pop())
    self._version = version
    return steps

  def run(self) -> None:
    stop = launch.stop_event()
    try:
      while not stop.is_set():
        wanted = None if self._version is None else self._version + 1
        version = self.wait_for_round(wanted, stop)
        if version is None:
          return
        self.collect_round(version)
    except Exception:  # pylint: disable=broad-except
      if stop.is_set():  # The learner or queue went away while stopping.
        logging.info('PPO actor %d stopped.', self._actor_id)
        return
      raise
    finally:
      self._environment.close()
