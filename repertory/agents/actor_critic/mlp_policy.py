"""The feedforward policy-value network of PPO and A3C, and its snapshot.

The learners train it; actors evaluate its weights in numpy
(`numpy_policy.NumpyPolicy`).
"""

from typing import Sequence

from dm_env import specs
import sonnet as snt
import tensorflow as tf

from repertory.components.networks import separate_mlp
from repertory.components.specs import num_actions

# The name of the variable group actors fetch from the learner.
POLICY = 'policy'


def make_network(hidden_sizes: Sequence[int], observation_spec: specs.Array,
                 action_spec: specs.Array,
                 network: str = separate_mlp.SHARED_RELU) -> snt.Module:
  """Builds an MLP policy-value network and creates its variables.

  `network` is one of `separate_mlp.KINDS` (`'shared_relu'`: one ReLU torso
  for policy and value; `'separate_tanh'`: SB3's `MlpPolicy`)."""
  module = unbuilt_network(hidden_sizes, observation_spec, action_spec,
                           network)
  module(tf.zeros((1,) + tuple(observation_spec.shape),
                  tf.as_dtype(observation_spec.dtype)))
  return module


def unbuilt_network(hidden_sizes: Sequence[int],
                    observation_spec: specs.Array,
                    action_spec: specs.Array,
                    network: str = separate_mlp.SHARED_RELU) -> snt.Module:
  """`make_network`'s module before its variables exist."""
  return separate_mlp.policy_value_mlp(
      network, hidden_sizes, max(len(observation_spec.shape), 1),
      num_actions(action_spec))


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

