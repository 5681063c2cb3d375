"""IMPALA's LSTM actor-critic acting on legal actions, for players that carry
their own core state (self-play's seats and league snapshots).

    policy = LSTMPolicy(lstm_size=64)
    policy.set_weights(weights)          # networks.get_variables(network)
    state = policy.initial_state(B)      # zeros: the start of a game
    actions, log_probs, state = policy.act(observations, legal, state, rng)
    probs = policy.sequence_probabilities(observations_tb, legal)  # [T, B]

The network is `actor_critic.networks.make_network` with `use_lstm=True`
(`networks.RecurrentPolicyValueNetwork`: MLP torso, LSTM core, policy and
value heads), the one IMPALA's learner trains, so a learner's
`networks.get_variables` are its weights. The step runs in numpy
(`numpy_policy.LogitsPolicy`: an actor needs no TensorFlow); logits are
masked to the legal actions and sampled with `league.sample_legal`
(ε-exploration included, as `MLPPolicy.act`).
"""

from typing import Any, Mapping, Optional, Sequence, Tuple

from dm_env import specs
import numpy as np

from repertory.agents.actor_critic import config as config_lib
from repertory.agents.actor_critic import numpy_policy
from repertory.components.league import policy as league_policy


def lstm_config(hidden_sizes: Sequence[int],
                lstm_size: int) -> config_lib.ActorCriticConfig:
  """The actor-critic settings of IMPALA's LSTM network of these sizes."""
  return config_lib.ActorCriticConfig(hidden_sizes=tuple(hidden_sizes),
                                      use_lstm=True, lstm_size=lstm_size)


def make_network(observation_shape: Sequence[int], num_actions: int,
                 hidden_sizes: Sequence[int], lstm_size: int) -> Any:
  """IMPALA's LSTM network (variables built) over `[B, *observation_shape]`
  float32 observations (TensorFlow)."""
  from repertory.agents.actor_critic import networks as networks_lib  # pylint: disable=g-import-not-at-top
  return networks_lib.make_network(
      lstm_config(hidden_sizes, lstm_size),
      specs.Array(tuple(observation_shape), np.float32),
      specs.DiscreteArray(int(num_actions)))


class LSTMPolicy:
  """Acting with an LSTM actor-critic's weights; the caller keeps each
  player's state (`initial_state` rows at the start of its game)."""

  def __init__(self, lstm_size: int, seed: int = 0):
    self._policy = numpy_policy.LogitsPolicy(seed=seed, lstm_size=lstm_size)
    self.lstm_size = lstm_size

  @classmethod
  def from_weights(cls, weights: Mapping[str, np.ndarray],
                   seed: int = 0) -> 'LSTMPolicy':
    """The policy of an LSTM network's weights (`networks.get_variables`
    names), its LSTM size read from their shapes."""
    if 'core/lstm/w_h' not in weights:
      raise ValueError('LSTMPolicy.from_weights needs the weights of an LSTM '
                       f'actor-critic; got names {sorted(weights)}.')
    policy = cls(weights['core/lstm/w_h'].shape[0], seed=seed)
    policy.set_weights(weights)
    return policy

  def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
    self._policy.set_weights(weights)

  @staticmethod
  def state(hidden: np.ndarray, cell: np.ndarray) -> numpy_policy.LSTMState:
    """The state of rows whose LSTM hidden and cell arrays are given."""
    return numpy_policy.LSTMState(hidden=np.asarray(hidden, np.float32),
                                  cell=np.asarray(cell, np.float32))

  def initial_state(self, batch_size: int) -> numpy_policy.LSTMState:
    """Zero state of `[batch_size, lstm_size]` numpy arrays."""
    return self._policy.initial_state(batch_size)

  def step(self, observations: np.ndarray, legal: np.ndarray,
           state: Any) -> Tuple[np.ndarray, Any]:
    """(probabilities over the legal actions `[B, A]`, next state)."""
    observations = np.asarray(observations, np.float32)
    first = np.zeros(len(observations), bool)  # The caller resets states.
    _, extras, state = self._policy.step(observations, state, first)
    return league_policy.legal_probabilities(extras['logits'], legal), state

  def act(self, observations: np.ndarray, legal: np.ndarray, state: Any,
          rng: Optional[np.random.Generator], greedy: bool = False,
          epsilon: float = 0.0
          ) -> Tuple[np.ndarray, np.ndarray, Any]:
    """Sampled (or greedy) legal actions `[B]`, their log-probs `[B]` (of
    the ε-mixture with `epsilon`) and the next state."""
    probs, state = self.step(observations, legal, state)
    actions, log_probs = league_policy.sample_legal(probs, legal, rng, greedy,
                                                    epsilon)
    return actions, log_probs, state

  def sequence_probabilities(self, observations: np.ndarray,
                             legal: np.ndarray) -> np.ndarray:
    """The probabilities `[B, A]` at the last of `[T, B, *obs]` observations
    (a player's views at its turns, from the start of its game; `legal`:
    the last turn's `[B, A]`)."""
    observations = np.asarray(observations, np.float32)
    state = self.initial_state(observations.shape[1])
    everything = np.ones_like(np.asarray(legal, np.float32))
    for t in range(observations.shape[0]):
      probs, state = self.step(observations[t], everything
                               if t < observations.shape[0] - 1 else legal,
                               state)
    return probs
