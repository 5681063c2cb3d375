"""SEED's networks: the actor-critic's policy-value network, trained by the
V-trace learner and evaluated by the inference server (`make_policy`)."""

from typing import Any

from repertory.components.actor_critic import acting
from repertory.components.actor_critic import config as config_lib
from repertory.components.actor_critic import numpy_policy


def make_policy(config: config_lib.ActorCriticConfig, spec: Any,
                seed: int = 0) -> numpy_policy.LogitsPolicy:
  """The inference server's batched, sampling policy: the learner's network
  evaluated in numpy, as IMPALA's actors evaluate it
  (`actor_critic.acting.make_policy`).

  The network is an MLP torso, an optional LSTM and two linear heads: a
  server call is a few small matrix products, less work than one
  TensorFlow session call, and a server in a process of its own
  (`inference_placement='separate'`) then imports no TensorFlow. The server
  draws each actor's actions from that actor's own numbers (`step`'s
  `uniform`)."""
  del spec  # The network's shapes come with its weights.
  return acting.make_policy(config, seed)[0]
