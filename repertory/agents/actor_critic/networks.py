"""The actor-critic's networks: an MLP or MinAtar torso, optionally an
LSTM, a policy-value head.

`Policy` wraps a network with the one compiled function actors need: a
batched step that zeroes the recurrent state of environments starting a new
episode, runs the network once over all environments and samples actions.
"""

from typing import Any, Dict, Optional, Tuple

from dm_env import specs
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.agents.actor_critic import config as config_lib
from repertory.agents.actor_critic import numpy_policy
from repertory.components import networks
from repertory.components.specs import num_actions
from repertory.components.specs import resolve_torso

# The name of the variable group actors fetch from the learner.
POLICY = 'policy'


def make_network(config: config_lib.ActorCriticConfig,
                 observation_spec: specs.Array, action_spec: specs.Array, build: bool = True) -> snt.Module:
  """Builds (and, if `build`, creates the variables of) the network."""
  kind = resolve_torso(config.torso, observation_spec)

  def torso(name):
    if kind == 'minatar':
      return networks.MinAtarTorso(name=name)
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
  if not build:
    return network
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
  """A network's batched acting step, in a graph of its own.

  `step(observation [N, ...], state, first [N] bool)` returns numpy
  `(action [N], extras, next_state)` with extras `{'logits': [N, A]}` (the
  behaviour logits the learner needs); the state is `()` for a
  feedforward network and an `LSTMState` of `[N, lstm_size]` arrays
  otherwise. The state passed in is the state *before* this step; rows where
  `first` holds are zeroed first (a new episode starts there).

  The step runs through `GraphFunction` (`Session.run`, numpy in and out):
  TF 2.15 on CPython 3.11 leaks a block per `EagerTensor`, so a
  `tf.function` step would make a long-running actor grow.
  `set_weights` takes the learner's `networks.get_variables(network)`.
  """

  def __init__(self, config: config_lib.ActorCriticConfig,
               observation_spec: specs.Array, action_spec: specs.Array,
               greedy: bool = False, seed: int = 0):
    self.recurrent = bool(config.use_lstm)
    self._config = config
    self._rng = np.random.RandomState(seed)
    self._greedy = greedy
    recurrent = self.recurrent

    def step(network, observation, state, first, sample_seed):
      if recurrent:
        state = _reset_state(state, first)
        output, next_state = network(observation, state)
      else:
        output, next_state = network(observation), ()
      logits = output.logits
      if greedy:
        action = tf.argmax(logits, axis=-1, output_type=tf.int32)
      else:
        action = tf.random.stateless_categorical(
            logits, 1, sample_seed, dtype=tf.int32)[:, 0]
      return action, logits, next_state

    state_signature = () if not recurrent else snt.LSTMState(
        hidden=tf.TensorSpec((None, config.lstm_size), tf.float32),
        cell=tf.TensorSpec((None, config.lstm_size), tf.float32))
    self._function = networks.GraphFunction(
        lambda: make_network(config, observation_spec, action_spec,
                             build=False),
        step,
        [tf.TensorSpec((None,) + tuple(observation_spec.shape),
                       tf.as_dtype(observation_spec.dtype)),
         state_signature, tf.TensorSpec((None,), tf.bool),
         tf.TensorSpec((2,), tf.int64)])

  def initial_state(self, batch_size: int) -> Any:
    """Zero recurrent state (numpy) for `batch_size` environments."""
    if not self.recurrent:
      return ()
    zeros = np.zeros((batch_size, self._config.lstm_size), np.float32)
    return snt.LSTMState(hidden=zeros, cell=zeros.copy())

  def step(self, observation: Any, state: Any, first: np.ndarray,
           uniform: Optional[np.ndarray] = None
           ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Any]:
    """One batched step. With `uniform` ([N] numbers in [0, 1)), row i's
    action is drawn from its own number (`numpy_policy.sample_from_uniform`)
    instead of from this policy's random stream: how a server batching
    several actors gives each actor actions that do not depend on the
    batching."""
    seed = self._rng.randint(0, 2**31 - 1, size=2, dtype=np.int64)
    action, logits, next_state = self._function(
        np.asarray(observation), state, np.asarray(first, bool), seed)
    if uniform is not None and not self._greedy:
      action = numpy_policy.sample_from_uniform(logits, uniform)
    if self.recurrent:
      next_state = snt.LSTMState(*next_state)
    return action, {'logits': logits}, next_state

  def set_weights(self, weights) -> None:
    self._function.set_weights(weights)


def state_spec(config: config_lib.ActorCriticConfig) -> Any:
  """The recurrent state of one environment as numpy examples (or None)."""
  if not config.use_lstm:
    return None
  return snt.LSTMState(hidden=np.zeros((config.lstm_size,), np.float32),
                       cell=np.zeros((config.lstm_size,), np.float32))


def export_snapshot(network: snt.Module, observation_spec: specs.Array,
                    path: str) -> str:
  """Exports `network`'s greedy policy as a SavedModel; returns its path."""
  from repertory.components import model_store  # pylint: disable=g-import-not-at-top
  if is_recurrent(network):
    def policy(observation, state):
      output, state = network(observation, state)
      return tf.argmax(output.logits, axis=-1, output_type=tf.int32), state
    initial_state = network.initial_state
  else:
    def policy(observation):
      return tf.argmax(network(observation).logits, axis=-1,
                       output_type=tf.int32)
    initial_state = None
  return model_store.export_policy(path, policy, observation_spec,
                                   owner=network, initial_state=initial_state)
