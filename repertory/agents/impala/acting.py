"""IMPALA's actor node: a `BatchedActor` that writes unrolls (the evaluation
actor is `agents.actor_critic.acting.EvalActor`).

The actor node holds a local copy of the policy, steps `envs_per_actor`
environments with one policy call per step, writes `[T + 1]` unrolls with
behaviour logits (and the LSTM state) through `UnrollAdder` into the Reverb
queue, and refreshes its weights from the learner every
`variable_update_period` steps through a `VariableClient`.

The policy, feedforward or LSTM, is evaluated in numpy
(`actor_critic.acting.make_policy`) and the queue written through Reverb's
C++ client (`launch.reverb_lite` in a process of its own), so an actor
process never imports TensorFlow.
"""

from typing import Any

import numpy as np

from repertory.components import variables
from repertory.agents.actor_critic import acting as actor_critic_acting
from repertory.agents.actor_critic import config as config_lib
from repertory.agents.actor_critic import numpy_policy
from repertory.components.actors import BatchedActor
from repertory.components.evaluation import episodes
from repertory.components.specs import num_actions as num_actions_of


class ImpalaActor(BatchedActor):
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
    from repertory import environments  # pylint: disable=g-import-not-at-top
    from repertory.components import adders  # pylint: disable=g-import-not-at-top
    environment = environments.make_batched(
        env_spec, num_envs, seed=seed,
        kind=config_lib.batched_env_kind(config.batched_env_kind, env_spec))
    observation_spec = environment.observation_spec()
    action_spec = environment.action_spec()
    policy, core_state_spec = actor_critic_acting.make_policy(config, seed)
    client = variables.VariableClient(
        learner, numpy_policy.POLICY,
        update_period=config.variable_update_period,
        transport=config.weights_transport)
    num_actions = num_actions_of(action_spec)
    adder = adders.UnrollAdder(
        replay, table, unroll_length=config.unroll_length, num_envs=num_envs,
        actor_id=actor_id,
        environment_spec=adders.EnvironmentSpec(
            observation_spec, action_spec, None, None),
        extras_spec={'logits': np.zeros((num_actions,), np.float32)},
        core_state_spec=core_state_spec, batched_items=config.batched_items)
    super().__init__(environment, policy, adder, counter, monitor,
                     report_every=config.unroll_length,
                     variable_client=client,
                     min_report_interval_s=episodes.REPORT_INTERVAL_S)
