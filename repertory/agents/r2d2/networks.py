"""R2D2's recurrent dueling Q network on (observation, previous action,
previous reward) (Kapturowski et al. 2019, section 2.3)."""

from typing import Any, Optional, Sequence, Tuple

import sonnet as snt
import tensorflow as tf

from repertory.components import networks


class RecurrentQNetwork(snt.Module):
  """MLP torso(observation) ++ one_hot(prev action) ++ prev reward -> LSTM ->
  dueling Q head.

  Inputs are `OAR(observation, action, reward)` nests (see
  `repertory.environments.ObservationActionReward`) with leading `[B]` (one
  step) or `[T, B]` (unroll) dimensions. The state is `snt.LSTMState`.
  """

  def __init__(self,
               num_actions: int,
               obs_rank: int,
               torso_sizes: Sequence[int] = (64,),
               lstm_size: int = 64,
               head_sizes: Sequence[int] = (64,),
               name: Optional[str] = None):
    super().__init__(name=name)
    self._torso = networks.MLPTorso(torso_sizes, obs_rank=obs_rank)
    self._core = networks.LSTMCore(lstm_size)
    self._head = networks.DuelingQHead(num_actions, head_sizes)
    self.num_actions = num_actions

  def initial_state(self, batch_size: int) -> snt.LSTMState:
    return self._core.initial_state(batch_size)

  def _embed(self, oar: Any) -> tf.Tensor:
    """`[..., D]` embedding of the observation, previous action and reward."""
    observation, action, reward = oar
    action = tf.one_hot(tf.cast(action, tf.int32), self.num_actions)
    reward = tf.cast(reward, tf.float32)[..., None]
    return tf.concat([self._torso(observation), action, reward], axis=-1)

  def __call__(self, oar: Any, state: snt.LSTMState
               ) -> Tuple[tf.Tensor, snt.LSTMState]:
    """One step: `[B]` inputs -> (Q-values `[B, A]`, next state)."""
    embedding, state = self._core(self._embed(oar), state)
    return self._head(embedding), state

  def unroll(self, oar: Any, state: snt.LSTMState,
             reset: Optional[tf.Tensor] = None
             ) -> Tuple[tf.Tensor, snt.LSTMState]:
    """`[T, B]` inputs -> (Q-values `[T, B, A]`, final state)."""
    embedding = self._embed(oar)  # [T, B, D]
    outputs, state = self._core.unroll(embedding, state, reset)
    return self._head(outputs), state


def make_network(environment_spec: Any, config: Any,
                 build: bool = True) -> RecurrentQNetwork:
  """Builds the network for an environment spec (`EnvironmentSpec`) and
  an R2D2 `Config`, and creates its variables with one dummy step (unless
  `build` is False: `networks.GraphFunction` creates them in its graph)."""
  observation_spec = environment_spec.observations
  if hasattr(observation_spec, 'observation'):  # An OAR spec.
    observation_spec = observation_spec.observation
  num_actions = getattr(environment_spec.actions, 'num_values', None)
  if num_actions is None:
    raise ValueError(f'R2D2 needs a discrete action spec (DiscreteArray), got '
                     f'{environment_spec.actions!r}.')
  network = RecurrentQNetwork(
      num_actions=int(num_actions),
      obs_rank=max(1, len(observation_spec.shape)),
      torso_sizes=config.torso_sizes,
      lstm_size=config.lstm_size,
      head_sizes=config.head_sizes)
  dummy = (tf.zeros((1,) + tuple(observation_spec.shape), tf.float32),
           tf.zeros((1,), tf.int32), tf.zeros((1,), tf.float32))
  if build:
    network(dummy, network.initial_state(1))
  return network
