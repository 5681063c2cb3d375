"""NeuRD's acting: the actor-critic family's numpy step restricted to the
legal actions (the mask that ends a seat's flat view), with a share of
uniformly random legal moves; the actor node is a kit `BatchedActor`
writing unrolls, its evaluation actor (also the league's player of
snapshots) samples the policy: in imperfect-information games the mixed
strategy is the point. No TensorFlow in these processes."""

from typing import Any, Dict, Optional, Tuple

import numpy as np

from repertory.components import variables
from repertory.components.actors import BatchedActor
from repertory.components.evaluation import episodes
from repertory.agents.actor_critic import acting as actor_critic_acting
from repertory.agents.actor_critic import config as actor_critic_config
from repertory.agents.actor_critic import numpy_policy
from repertory.agents.neurd import config as config_lib

_ILLEGAL_LOGIT = -1e9


class LegalPolicy(numpy_policy.LogitsPolicy):
  """`LogitsPolicy` over the legal actions (the last `num_actions` entries
  of each observation); with probability `exploration` a uniformly random
  legal action. Extras `{'logits'}` are the behaviour's log-probabilities."""

  def __init__(self, num_actions: int, exploration: float = 0.0,
               seed: int = 0, activation: str = 'relu'):
    super().__init__(seed=seed, activation=activation)
    self._num_actions, self._exploration = num_actions, exploration

  def behaviour_log_probs(self, observation: np.ndarray) -> np.ndarray:
    """log μ(·|o) `[N, A]`: (1 - ε) π + ε uniform, both over legal actions."""
    observation = np.asarray(observation)
    logits, _, _ = self._evaluate(observation, None)
    legal = observation.reshape(len(observation), -1)[
        :, -self._num_actions:] > 0
    # A game's last observation has no legal action (the batched
    # environment resets there, whatever the action): any will do.
    legal |= ~legal.any(axis=-1, keepdims=True)
    logits = np.where(legal, logits.astype(np.float64), _ILLEGAL_LOGIT)
    pi = np.exp(logits - logits.max(axis=-1, keepdims=True)) * legal
    pi /= pi.sum(axis=-1, keepdims=True)
    uniform = legal / legal.sum(axis=-1, keepdims=True)
    mu = (1.0 - self._exploration) * pi + self._exploration * uniform
    with np.errstate(divide='ignore'):
      return np.where(legal, np.log(mu), _ILLEGAL_LOGIT)

  def step(self, observation: np.ndarray, state: Any, first: Any,
           uniform: Optional[np.ndarray] = None
           ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Any]:
    del first
    log_mu = self.behaviour_log_probs(observation)
    action = self._sample(log_mu, uniform)
    return (action.astype(np.int32),
            {'logits': log_mu.astype(np.float32)}, state)


class NeuRDActor(BatchedActor):
  """An actor node: `run()` plays the seat until the program stops, writing
  `[T + 1]` unrolls (`UnrollAdder`) into the queue."""

  def __init__(self, actor_id: int, config: config_lib.Config, env_spec: Any,
               num_envs: int, seed: int, learner: Any, replay: Any,
               table: str, counter: Any = None, monitor: Any = None):
    """`actors.add_actor_nodes`'s arguments: see `agents.impala.acting`."""
    from repertory import environments  # pylint: disable=g-import-not-at-top
    from repertory.components import adders  # pylint: disable=g-import-not-at-top
    environment = environments.make_batched(
        env_spec, num_envs, seed=seed,
        kind=actor_critic_config.batched_env_kind(config.batched_env_kind, env_spec))
    action_spec = environment.action_spec()
    num_actions = int(action_spec.num_values)
    policy = LegalPolicy(num_actions, config.exploration, seed,
                         config.activation)
    client = variables.VariableClient(
        learner, numpy_policy.POLICY,
        update_period=config.variable_update_period,
        transport=config.weights_transport)
    adder = adders.UnrollAdder(
        replay, table, unroll_length=config.unroll_length, num_envs=num_envs,
        actor_id=actor_id,
        environment_spec=adders.EnvironmentSpec(
            environment.observation_spec(), action_spec, None, None),
        extras_spec={'logits': np.zeros((num_actions,), np.float32)},
        batched_items=config.batched_items)
    super().__init__(environment, policy, adder, counter, monitor,
                     report_every=config.unroll_length,
                     variable_client=client,
                     min_report_interval_s=episodes.REPORT_INTERVAL_S)


class EvalActor(actor_critic_acting.EvalActor):
  """The actor-critic's evaluation actor (one environment, the learner's
  newest weights) with actions sampled from π over the legal actions."""

  def __init__(self, config: config_lib.Config, spec: Any,
               variable_source: Any, seed: int = 0):
    super().__init__(config, spec, variable_source, greedy=False, seed=seed)
    self._policy = LegalPolicy(int(spec.actions.num_values), 0.0, seed,
                               config.activation)


def make_eval_actor(config: config_lib.Config, spec: Any,
                    variable_source: Any) -> EvalActor:
  """`make_eval_actor(variable_source)` for the run monitor and the league
  (use a partial)."""
  return EvalActor(config, spec, variable_source)
