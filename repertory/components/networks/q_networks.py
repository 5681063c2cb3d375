"""Q networks: feedforward (DQN / Ape-X) and recurrent (R2D2).

Both follow the interface of `recurrence.py` (`initial_state`, one step,
`unroll` over `[T, B]`); the feedforward one has an empty state `()`.
"""

from typing import NamedTuple, Optional, Sequence, Tuple

import sonnet as snt
import tensorflow as tf

from repertory.components.networks import heads
from repertory.components.networks import recurrence


def _make_q_head(num_actions: int, hidden_sizes: Sequence[int],
                 dueling: bool) -> snt.Module:
  if dueling:
    return heads.DuelingQHead(num_actions, hidden_sizes)
  return heads.QHead(num_actions, hidden_sizes)


class QNetwork(snt.Module):
  """torso -> (dueling) Q head; `[..., *obs]` -> `[..., num_actions]`.

  Ape-X DQN (Horgan et al. 2018) uses the Atari torso with a dueling head
  (Wang et al. 2016).
  """

  def __init__(self, torso: snt.Module, num_actions: int,
               head_hidden_sizes: Sequence[int] = (512,),
               dueling: bool = True, name: Optional[str] = None):
    super().__init__(name=name)
    self._torso = torso
    self._head = _make_q_head(num_actions, head_hidden_sizes, dueling)
    self.num_actions = num_actions

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._head(self._torso(observation))

  def initial_state(self, batch_size: int) -> Tuple[()]:
    del batch_size
    return ()

  def unroll(self, observation: tf.Tensor, state: Tuple[()] = (),
             reset: Optional[tf.Tensor] = None) -> Tuple[tf.Tensor, Tuple[()]]:
    del reset
    return self(observation), state


class R2D2Input(NamedTuple):
  """What the R2D2 network consumes at each step.

  Attributes:
    observation: `[..., *obs]` the current observation x_t.
    prev_action: `[...]` int, the action a_{t-1}; at an episode start pass
      -1 (embedded as an all-zero one-hot) or 0.
    prev_reward: `[...]` float, the reward r_{t-1} (0 at an episode start).
  """
  observation: tf.Tensor
  prev_action: tf.Tensor
  prev_reward: tf.Tensor


class R2D2Network(snt.Module):
  """torso -> [embedding, one-hot a_{t-1}, r_{t-1}] -> LSTM -> dueling Q.

  The recurrent Q network of R2D2 (Kapturowski et al. 2019, section 2 and
  appendix: Atari torso, LSTM 512, dueling head).
  """

  def __init__(self, torso: snt.Module, num_actions: int,
               lstm_size: int = 512,
               head_hidden_sizes: Sequence[int] = (512,),
               dueling: bool = True, name: Optional[str] = None):
    super().__init__(name=name)
    self._torso = torso
    self._core = recurrence.LSTMCore(lstm_size)
    self._head = _make_q_head(num_actions, head_hidden_sizes, dueling)
    self.num_actions = num_actions

  def initial_state(self, batch_size: int) -> snt.LSTMState:
    """Zero LSTM state, leaves `[B, lstm_size]`."""
    return self._core.initial_state(batch_size)

  def _embed(self, inputs: R2D2Input) -> tf.Tensor:
    """`[..., *obs]` etc. -> `[..., D + A + 1]`, any leading dims."""
    if not isinstance(inputs, R2D2Input):
      raise TypeError(
          f'R2D2Network expects an R2D2Input(observation, prev_action, '
          f'prev_reward), got {type(inputs).__name__}.')
    embedding = self._torso(inputs.observation)
    prev_action = tf.one_hot(tf.cast(inputs.prev_action, tf.int32),
                             self.num_actions)
    prev_reward = tf.cast(inputs.prev_reward, tf.float32)[..., tf.newaxis]
    return tf.concat([embedding, prev_action, prev_reward], axis=-1)

  def __call__(self, inputs: R2D2Input,
               state: snt.LSTMState) -> Tuple[tf.Tensor, snt.LSTMState]:
    """One step: `R2D2Input` of `[B, ...]` -> (Q `[B, A]`, next state)."""
    output, state = self._core(self._embed(inputs), state)
    return self._head(output), state

  def unroll(self, inputs: R2D2Input, state: snt.LSTMState,
             reset: Optional[tf.Tensor] = None
             ) -> Tuple[tf.Tensor, snt.LSTMState]:
    """`R2D2Input` of `[T, B, ...]` -> (Q `[T, B, A]`, final state).

    For a learner step with burn-in, use
    `recurrence.burn_in_unroll(network.unroll, inputs, state, burn_in)`.
    """
    outputs, state = self._core.unroll(self._embed(inputs), state, reset)
    return self._head(outputs), state
