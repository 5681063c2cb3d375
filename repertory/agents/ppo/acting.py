"""PPO acting: one round of exactly `unroll_length` batched steps per version.

The actor waits (on the learner) for the round's policy version, fetches its
weights, steps its `envs_per_actor` environments `unroll_length` times with
one policy call per step, and writes their unrolls (with the behaviour
log-probs and values) to the queue through `UnrollAdder`: one item of all
of them (`batched_items`), or one per environment. It then
waits for the next version: no step is ever taken with a policy other than
the round's.

The policy is evaluated in numpy (`numpy_policy.NumpyPolicy`) and the queue
written through Reverb's C++ client (`launch.reverb_lite` in a process of
its own), so an actor process never imports TensorFlow.

The evaluation actor is `agents.actor_critic.numpy_policy.EvalActor`.
"""

from typing import Any, Optional

from absl import logging
import numpy as np

from repertory.agents.ppo import config as config_lib
from repertory.components import adders
from repertory.agents.actor_critic import rounds
from repertory.agents.actor_critic import rollout_actor

# The queue of unrolls between PPO actors and learner.
QUEUE = 'queue'
# How long one blocking call may hold the learner while an actor waits for a
# version; the actor repeats it until `round_timeout_s` has passed.
WAIT_SLICE_S = 2.0


def extras_spec() -> dict:
  """The per-step extras PPO actors write: behaviour log-prob and value."""
  return {'log_prob': np.zeros((), np.float32),
          'value': np.zeros((), np.float32)}


class PPOActor(rollout_actor.RolloutActor):
  """Collects one round of `unroll_length` steps per policy version.

  Args: as `RolloutActor`'s, with `replay` (a `reverb.Client` of the server
  holding the queue), a learner with `wait_for_version`, and `max_rounds`:
  the run's step budget in whole rounds (`config.rounds_for_budget`). With
  it the actor collects the rounds of versions 0 .. max_rounds - 1 and then
  waits for the program to stop (the run monitor stops it once the counter
  holds every round); every actor decides alike from the version, so none
  waits for a round that another skipped (a budget shared by reservation
  can grant one actor its last round and refuse another, which leaves the
  learner waiting for an incomplete round). Without it the actor takes its
  steps from the run's budget like other actors.
  """

  def __init__(self,
               actor_id: int,
               config: config_lib.Config,
               env: str,
               envs_per_actor: int,
               seed: int,
               replay: Any,
               learner: Any,
               counter: Any = None,
               monitor: Any = None,
               max_rounds: Optional[int] = None):
    self._replay = replay
    self._max_rounds = max_rounds
    super().__init__(actor_id, config, env, envs_per_actor, seed, learner,
                     counter, monitor)

  def _setup(self) -> None:
    config, replay = self._config, self._replay
    self._adder = adders.UnrollAdder(
        replay, QUEUE, unroll_length=config.unroll_length,
        num_envs=self._num_envs, actor_id=self._actor_id,
        environment_spec=adders.EnvironmentSpec(
            self.observation_spec, self.action_spec, None, None),
        extras_spec=extras_spec(), batched_items=config.batched_items)
    self._round_version: Optional[int] = None

  @property
  def version(self) -> Optional[int]:
    """The version of the last round collected (None before the first)."""
    return self._round_version

  def wait_for_round(self, version: Optional[int], stop=None) -> Optional[int]:
    """Waits until the learner serves `version`, then holds its weights.

    `version` None takes the learner's current version (the first round).
    Returns the version held, or None if `stop` was set while waiting.

    Raises:
      TimeoutError: naming the version after `round_timeout_s`.
      RuntimeError: if the learner serves an earlier version than asked
        for (the rounds are out of step). A later one is the learner's
        republished state (a rollback, a league exploiter's restart): the
        round is that version's.
    """
    if version is not None and rounds.wait_for_version(
        self._learner, version, stop, self._config.round_timeout_s,
        f'PPO actor {self._actor_id}', WAIT_SLICE_S) is None:
      return None
    self._weights.update(wait=True)
    held = self._weights.version
    if version is not None and held > version:
      logging.info('PPO actor %d: the learner republished; round %d is '
                   'version %d\'s.', self._actor_id, version, held)
    elif version is not None and held != version:
      raise RuntimeError(
          f'PPO actor {self._actor_id} waited for version {version} but the '
          f'learner serves {held}: the synchronous rounds are out of step.')
    self._policy.set_weights(self._weights.params)
    return held

  def collect_round(self, version: int) -> int:
    """Steps every environment `unroll_length` times with the held weights.

    Returns the number of environment steps taken.
    """
    self._set_version(version)
    self.collect(self._config.unroll_length)
    self._adder.flush()  # The whole round is on the server before we wait.
    self.report(self._config.unroll_length)
    self._round_version = version
    return self._config.unroll_length * self._num_envs

  def acquire(self, steps: int) -> bool:
    if self._max_rounds is None:
      return super().acquire(steps)
    return True  # `round` checks the budget, in whole rounds.

  def round(self, stop) -> bool:
    wanted = None if self._round_version is None else self._round_version + 1
    version = self.wait_for_round(wanted, stop)
    if version is None:
      return False
    if self._max_rounds is not None and version >= self._max_rounds:
      self._reporter.flush()
      logging.info('PPO actor %d: the step budget ends with round %d; '
                   'waiting for the program to stop.', self._actor_id,
                   self._max_rounds - 1)
      stop.wait()
      return False
    self.collect_round(version)
    return True

