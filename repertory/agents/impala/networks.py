"""IMPALA's networks: an MLP torso, optionally an LSTM, a policy-value head.

`Policy` wraps a network with the one compiled function actors need: a
batched step that zeroes the recurrent state of environments starting a new
episode, runs the network once over all environments and samples actions.
"""

from typing import Any, Dict, Tuple

import dm_env
from dm_env import specs
import numpy as np
import sonnet as snt
import tensorflow as tf
import tree

from repertory.agents.impala import config as config_lib
from repertory.components import networks

# The name of the variable group actors fetch from the learner.
POLICY = 'policy'


def num_actions(action_spec: specs.Array) -> int:
  """The number of discrete actions, or a clear error for other specs."""
  if isinstance(action_spec, specs.DiscreteArray):
    return int(action_spec.num_values)
  if (isinstance(action_spec, specs.BoundedArray) and action_spec.shape == ()
      and np.issubdtype(action_spec.dtype, np.integer)):
    return int(action_spec.maximum) - int(action_spec.minimum) + 1
  raise ValueError(f'IMPALA/SEED here take a single discrete action; got the '
                   f'action spec {action_spec!r}.')


def make_network(config: config_lib.Config, observation_spec: specs.Array,
                 action_spec: specs.Array) -> snt.Module:
  """Builds (and creates the variables of) the policy-value network."""
  def torso(name):
    return networks.MLPTorso(
        config.hidden_sizes, obs_rank=max(len(observation_spec.shape), 1),
        activation=getattr(tf.nn, config.activation), name=name)
  if config.use_lstm:
    network = networks.RecurrentPolicyValueNetwork(
        torso(None), num_actions=num_actions(action_spec),
        lstm_size=config.lstm_size)
  else:
    network = networks.PolicyValueNetwork(
        torso(None), num_actions=num_actions(action_spec),
        value_torso=None if config.shared_torso else torso('value_torso'))
  dummy = tf.zeros((1,) + tuple(observation_spec.shape),
                   tf.as_dtype(observation_spec.dtype))
  if config.use_lstm:
    network(dummy, network.initial_state(1))
  else:
    network(dummy)
  return network


def is_recurrent(network: snt.Module) -> bool:
  return isinstance(network, networks.RecurrentPolicyValueNetwork)


def _reset_state(state: Any, first: tf.Tensor) -> Any:
  """Zeroes the state rows of environments whose episode starts now."""
  def reset(leaf):
    mask = tf.reshape(first, [-1] + [1] * (leaf.shape.rank - 1))
    return tf.where(mask, tf.zeros_like(leaf), leaf)
  return tf.nest.map_structure(reset, state)


class Policy:
  """A network's batched acting step, compiled once.

  `step(observation [N, ...], state, first [N] bool)` returns numpy
  `(action [N], extras, next_state)` with extras `{'logits': [N, A]}` (the
  behaviour logits the learner needs); the state is `()` for a
  feedforward network and an `LSTMState` of `[N, lstm_size]` arrays
  otherwise. The state passed in is the state *before* this step; rows where
  `first` holds are zeroed first (a new episode starts there).
  """

  def __init__(self, network: snt.Module, observation_spec: specs.Array,
               greedy: bool = False, seed: int = 0):
    self.network = network
    self.recurrent = is_recurrent(network)
    self._greedy = greedy
    self._rng = tf.random.Generator.from_seed(seed)

    def step(observation, state, first):
      if self.recurrent:
        state = _reset_state(state, first)
        output, next_state = network(observation, state)
      else:
        output, next_state = network(observation), ()
      logits = output.logits
      if self._greedy:
        action = tf.argmax(logits, axis=-1, output_type=tf.int32)
      else:
        action = tf.random.stateless_categorical(
            logits, 1, self._rng.make_seeds(1)[:, 0], dtype=tf.int32)[:, 0]
      return action, logits, next_state

    # Calling the concrete function directly skips tf.function's dispatch
    # (about half of a small policy's call time on a CPU).
    state_signature = tf.nest.map_structure(
        lambda x: tf.TensorSpec((None,) + tuple(x.shape[1:]), x.dtype),
        network.initial_state(1))
    self._step = tf.function(step).get_concrete_function(
        tf.TensorSpec((None,) + tuple(observation_spec.shape),
                      tf.as_dtype(observation_spec.dtype)),
        state_signature, tf.TensorSpec((None,), tf.bool))

  def initial_state(self, batch_size: int) -> Any:
    """Zero recurrent state (numpy) for `batch_size` environments."""
    state = self.network.initial_state(batch_size)
    return tree.map_structure(lambda x: np.asarray(x), state)

  def step(self, observation: Any, state: Any, first: np.ndarray
           ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Any]:
    action, logits, next_state = self._step(
        tf.convert_to_tensor(observation),
        tf.nest.map_structure(tf.convert_to_tensor, state),
        tf.convert_to_tensor(first, tf.bool))
    return (action.numpy(), {'logits': logits.numpy()},
            tree.map_structure(lambda x: x.numpy(), next_state))

  def set_weights(self, weights) -> None:
    networks.assign_variables(self.network, weights)


def state_spec(config: config_lib.Config) -> Any:
  """The recurrent state of one environment as numpy examples (or None)."""
  if not config.use_lstm:
    return None
  return snt.LSTMState(hidden=np.zeros((config.lstm_size,), np.float32),
                       cell=np.zeros((config.lstm_size,), np.float32))


def environment_specs(env_spec: str) -> Tuple[Any, Any]:
  """(observation_spec, action_spec) of one environment of `env_spec`."""
  from repertory import environments  # pylint: disable=g-import-not-at-top
  environment: dm_env.Environment = environments.make(env_spec, seed=0)
  try:
    return environment.observation_spec(), environment.action_spec()
  finally:
    environment.close()
