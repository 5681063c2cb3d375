"""SEED's networks: the actor-critic's policy-value network, trained by the
V-trace learner and evaluated by the inference server (`make_policy`)."""

from typing import Any

from repertory import launch
from repertory.agents.actor_critic import acting
from repertory.agents.actor_critic import config as config_lib


def make_policy(config: config_lib.ActorCriticConfig, spec: Any,
                seed: int = 0) -> Any:
  """The inference server's batched, sampling policy (the server draws each
  actor's actions from that actor's own numbers: `step`'s `uniform`).

  On a process granted a GPU (`launch.gpu_visible()`), the network in
  TensorFlow (`actor_critic.networks.Policy`), which places it there.
  Otherwise the learner's network evaluated in numpy, as IMPALA's actors
  evaluate it (`actor_critic.acting.make_policy`): an MLP torso, an optional
  LSTM and two linear heads make a server call a few small matrix products,
  less work than one TensorFlow session call, and a server in a process of
  its own (`inference_placement='separate'`) then imports no TensorFlow."""
  if launch.gpu_visible():
    from repertory.agents.actor_critic import networks  # pylint: disable=g-import-not-at-top
    return networks.Policy(config, spec.observations, spec.actions,
                           seed=seed)
  return acting.make_policy(config, seed)[0]
