"""PPO's (and A3C's) feedforward policy-value network and its acting step.

`Policy` is the one compiled function actors need: a batched step over all
of an actor's environments that samples actions and returns their
log-probabilities and the state values, which on-policy learners store with
the experience (PPO) or use at once (A3C).
"""

from typing import Sequence, Tuple

from dm_env import specs
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.agents.impala.networks import environment_specs  # pylint: disable=unused-import
from repertory.agents.impala.networks import num_actions
from repertory.components import losses
from repertory.components import networks

# The name of the variable group actors fetch from the learner.
POLICY = 'policy'


def make_network(hidden_sizes: Sequence[int], observation_spec: specs.Array,
                 action_spec: specs.Array) -> networks.PolicyValueNetwork:
  """Builds an MLP policy-value network and creates its variables."""
  obs_rank = max(len(observation_spec.shape), 1)
  network = networks.PolicyValueNetwork(
      networks.MLPTorso(tuple(hidden_sizes), obs_rank=obs_rank),
      num_actions=num_actions(action_spec))
  network(tf.zeros((1,) + tuple(observation_spec.shape),
                   tf.as_dtype(observation_spec.dtype)))
  return network


class Policy:
  """A feedforward network's batched acting step, compiled once.

  `step(observation [N, ...])` returns numpy `(action [N] int32,
  log_prob [N], value [N])`: actions are sampled (or, with `greedy`, the most
  likely ones), log_prob is log π(action | observation).
  """

  def __init__(self, network: snt.Module, greedy: bool = False, seed: int = 0):
    self.network = network
    self._rng = tf.random.Generator.from_seed(seed)

    @tf.function
    def step(observation):
      output = network(observation)
      logits = output.logits
      if greedy:
        action = tf.argmax(logits, axis=-1, output_type=tf.int32)
      else:
        action = tf.random.stateless_categorical(
            logits, 1, self._rng.make_seeds(1)[:, 0], dtype=tf.int32)[:, 0]
      log_prob = losses.categorical_log_prob(logits, action)
      return action, log_prob, output.value

    self._step = step

  def step(self, observation: np.ndarray
           ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    action, log_prob, value = self._step(observation)
    return action.numpy(), log_prob.numpy(), value.numpy()

  def set_weights(self, weights) -> None:
    networks.assign_variables(self.network, weights)


def export_snapshot(path: str, network: snt.Module,
                    observation_spec: specs.Array) -> str:
  """Exports `network`'s greedy policy as a SavedModel at `path`.

  The snapshot runs without the training code:
  `python -m repertory.evaluate --snapshot=<path> --env=...`.
  """
  from repertory.components import model_store  # pylint: disable=g-import-not-at-top

  def policy(observation):
    return tf.argmax(network(observation).logits, axis=-1,
                     output_type=tf.int32)
  return model_store.export_policy(path, policy, observation_spec,
                                   owner=network)
