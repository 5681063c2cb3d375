"""The feedforward policy-value network of PPO and A3C and its acting step.

`Policy` is the one compiled function actors need: a batched step over all
of an actor's environments that samples actions and returns their
log-probabilities and the state values, which on-policy learners store with
the experience (PPO) or use at once (A3C).
"""

from typing import Any, Dict, Mapping, Sequence, Tuple

from dm_env import specs
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.components.specs import num_actions
from repertory.components import losses
from repertory.components import networks
from repertory.components.networks import separate_mlp

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


class Policy:
  """The policy-value network's batched acting step (see `GraphFunction`:
  it runs in a graph of its own, so acting creates no `EagerTensor`s).

  `act(observation [N, ...])` returns numpy `(action [N] int32,
  log_prob [N], value [N])` (`step` is the same as a `core.Policy`): actions are sampled (or, with `greedy`, the most
  likely ones), log_prob is log π(action | observation). `set_weights` takes
  the learner's `{name: array}` (`networks.get_variables` of the network
  `make_network` builds); until then the weights are freshly initialised.
  """

  def __init__(self, hidden_sizes: Sequence[int],
               observation_spec: specs.Array, action_spec: specs.Array,
               greedy: bool = False, seed: int = 0,
               network: str = separate_mlp.SHARED_RELU):
    self._rng = np.random.RandomState(seed)

    def step(module, observation, sample_seed):
      output = module(observation)
      logits, value = output.logits, output.value
      if greedy:
        action = tf.argmax(logits, axis=-1, output_type=tf.int32)
      else:
        action = tf.random.stateless_categorical(
            logits, 1, sample_seed, dtype=tf.int32)[:, 0]
      return action, losses.categorical_log_prob(logits, action), value

    self._function = networks.GraphFunction(
        lambda: unbuilt_network(hidden_sizes, observation_spec, action_spec,
                                network),
        step,
        [tf.TensorSpec((None,) + tuple(observation_spec.shape),
                       tf.as_dtype(observation_spec.dtype)),
         tf.TensorSpec((2,), tf.int64)])

  def act(self, observation: np.ndarray
          ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(action [N], log_prob [N], value [N])` for `[N, ...]` observations."""
    seed = self._rng.randint(0, 2**31 - 1, size=2, dtype=np.int64)
    action, log_prob, value = self._function(np.asarray(observation), seed)
    return action, log_prob, value

  # --- core.Policy (feedforward: no state), for `BatchedActor` ------------

  def initial_state(self, batch_size: int) -> Tuple[()]:
    del batch_size
    return ()

  def step(self, observation: np.ndarray, state: Any, first: Any
           ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Any]:
    """`act` as a `core.Policy` step; the extras are
    `{'log_prob': [N], 'value': [N]}` (what PPO's unrolls store)."""
    del first
    action, log_prob, value = self.act(observation)
    return action, {'log_prob': log_prob, 'value': value}, state

  def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
    self._function.set_weights(weights)

  def get_weights(self) -> Dict[str, np.ndarray]:
    return self._function.get_weights()


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

