"""Policy-and-value networks for IMPALA, SEED, PPO and A3C.

Both networks share the recurrent interface of `recurrence.py`
(`initial_state`, single step, `unroll` over `[T, B]`) so a learner can be
written once; the feedforward one has an empty state `()`.
"""

from typing import Any, Optional, Sequence, Tuple, Union

import sonnet as snt
import tensorflow as tf

from repertory.components.networks import heads
from repertory.components.networks import recurrence
from repertory.components.networks import torsos

Output = Union[heads.PolicyValueOutput, heads.GaussianPolicyValueOutput]


def _make_head(num_actions: Optional[int], action_size: Optional[int]):
  if (num_actions is None) == (action_size is None):
    raise ValueError(
        f'Give exactly one of num_actions (discrete) or action_size '
        f'(continuous), got num_actions={num_actions!r}, '
        f'action_size={action_size!r}.')
  if num_actions is not None:
    return heads.PolicyValueHead(num_actions)
  return heads.GaussianPolicyValueHead(action_size)


class PolicyValueNetwork(snt.Module):
  """torso -> policy-and-value head; feedforward.

  `net(obs)` works on `[B, ...]` (acting) and `[T, B, ...]` (learning) with the
  same weights. `unroll` / `initial_state` exist for learners written against
  the recurrent interface.
  """

  def __init__(self, torso: snt.Module, num_actions: Optional[int] = None,
               action_size: Optional[int] = None,
               value_torso: Optional[snt.Module] = None,
               name: Optional[str] = None):
    """Builds the network.

    Args:
      torso: maps `[..., *obs]` to `[..., D]`, e.g. `torsos.MLPTorso()`.
      num_actions: number of discrete actions (-> `PolicyValueOutput`).
      action_size: dimension of a continuous action (->
        `GaussianPolicyValueOutput`); give this or num_actions.
      value_torso: if given, the value reads this torso's embedding and the
        policy `torso`'s alone (no shared layers, so the value loss cannot
        disturb the policy's features); None shares `torso`.
      name: module name.
    """
    super().__init__(name=name)
    self._torso = torso
    self._value_torso = value_torso
    self._head = _make_head(num_actions, action_size)

  def __call__(self, observation: tf.Tensor) -> Output:
    value_embedding = (None if self._value_torso is None
                       else self._value_torso(observation))
    return self._head(self._torso(observation), value_embedding)

  def initial_state(self, batch_size: int) -> Tuple[()]:
    del batch_size
    return ()

  def unroll(self, observation: tf.Tensor, state: Tuple[()] = (),
             reset: Optional[tf.Tensor] = None) -> Tuple[Output, Tuple[()]]:
    """`[T, B, ...]` -> (outputs `[T, B, ...]`, `()`); no state to reset."""
    del reset
    return self(observation), state


def mlp_policy_value_network(environment_spec: Any,
                             hidden_sizes: Sequence[int] = (64, 64)
                             ) -> PolicyValueNetwork:
  """An `MLPTorso` policy-value network for an environment, variables built.

  Args:
    environment_spec: anything with `observations` and `actions` specs (e.g.
      `adders.EnvironmentSpec`, `experiment.environment_spec(env)`); a
      discrete action spec (`num_values`) gives a categorical head, a
      `[d]` one a Gaussian head.
    hidden_sizes: the MLP's layer widths.
  """
  observations, actions = environment_spec.observations, environment_spec.actions
  if hasattr(actions, 'num_values'):
    head = dict(num_actions=int(actions.num_values))
  elif len(actions.shape) == 1:
    head = dict(action_size=int(actions.shape[0]))
  else:
    raise ValueError(f'mlp_policy_value_network: expected a discrete or a '
                     f'[d] action spec, got {actions!r}.')
  network = PolicyValueNetwork(
      torsos.MLPTorso(tuple(hidden_sizes), max(len(observations.shape), 1)),
      **head)
  network(tf.zeros((1,) + tuple(observations.shape),
                   tf.as_dtype(observations.dtype)))  # Creates the variables.
  return network


class RecurrentPolicyValueNetwork(snt.Module):
  """torso -> LSTM -> policy-and-value head (IMPALA's LSTM agent, Espeholt
  et al. 2018, figure 3).

  The torso and head run once over all `[T, B]` steps; only the LSTM steps
  through time.
  """

  def __init__(self, torso: snt.Module, num_actions: Optional[int] = None,
               action_size: Optional[int] = None, lstm_size: int = 256,
               name: Optional[str] = None):
    """Builds the network.

    Args:
      torso: maps `[..., *obs]` to `[..., D]`.
      num_actions: number of discrete actions.
      action_size: dimension of a continuous action (instead of num_actions).
      lstm_size: LSTM hidden size.
      name: module name.
    """
    super().__init__(name=name)
    self._torso = torso
    self._core = recurrence.LSTMCore(lstm_size)
    self._head = _make_head(num_actions, action_size)

  def initial_state(self, batch_size: int) -> snt.LSTMState:
    """Zero LSTM state, leaves `[B, lstm_size]`."""
    return self._core.initial_state(batch_size)

  def __call__(self, observation: tf.Tensor,
               state: snt.LSTMState) -> Tuple[Output, snt.LSTMState]:
    """One step: observation `[B, ...]` -> (outputs `[B, ...]`, state)."""
    embedding, state = self._core(self._torso(observation), state)
    return self._head(embedding), state

  def unroll(self, observation: tf.Tensor, state: snt.LSTMState,
             reset: Optional[tf.Tensor] = None
             ) -> Tuple[Output, snt.LSTMState]:
    """`[T, B, ...]` -> (outputs `[T, B, ...]`, final state).

    Args:
      observation: `[T, B, *obs]`.
      state: the state before step 0 (as stored by the actor).
      reset: optional `[T, B]` bool, True at the first step of an episode
        (the state is zeroed before it).
    """
    embeddings = self._torso(observation)  # [T, B, D]
    outputs, state = self._core.unroll(embeddings, state, reset)
    return self._head(outputs), state
