"""A policy-value MLP in numpy: acting for many frozen opponents at once.

An actor meeting a different snapshot in every game cannot afford one
TensorFlow call per snapshot per step; this evaluates the weights of an MLP
torso with a linear policy head (and optionally a linear value head), named
as `networks.get_variables` names those of
`PolicyValueNetwork(MLPTorso(...), num_actions)` ('torso/mlp/layers/<i>/w',
'head/policy/w', 'head/value/w', ...), with numpy, legal-action masks
applied. A `networks.BoardTorso`'s 3x3 convolutions ('torso/convs/<i>/w')
run before the MLP when the weights have them:

    policy = MLPPolicy(weights)                  # {'torso/mlp/layers/0/w': ...}
    actions, log_probs = policy.act(observations, legal, rng)   # [B], [B]
    probs = policy.probabilities(observations, legal)            # [B, A]
"""

from typing import Mapping, Optional, Tuple

import numpy as np

from repertory.components import numpy_mlp
NEG_INF = -1e9


def masked_logits(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
  """Logits with illegal actions (legal == 0) pushed to -1e9."""
  return np.where(legal > 0, logits, NEG_INF)


def legal_probabilities(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
  """softmax over the legal actions of `logits` `[B, A]`."""
  logits = masked_logits(logits, legal)
  logits = logits - logits.max(axis=-1, keepdims=True)
  p = np.exp(logits)
  return p / p.sum(axis=-1, keepdims=True)


def sample_legal(probs: np.ndarray, legal: np.ndarray,
                 rng: Optional[np.random.Generator], greedy: bool = False,
                 epsilon: float = 0.0, uniform: Optional[np.ndarray] = None
                 ) -> Tuple[np.ndarray, np.ndarray]:
  """Sampled (or greedy) actions `[B]` of `probs` `[B, A]` and their
  log-probs `[B]`; with `epsilon`, of (1 - epsilon) probs + epsilon uniform
  over the legal actions (exploration). `uniform` ([B] numbers in [0, 1))
  replaces the draws from `rng`."""
  if epsilon > 0:
    spread = legal / legal.sum(axis=-1, keepdims=True)
    probs = (1.0 - epsilon) * probs + epsilon * spread
  if greedy:
    actions = probs.argmax(axis=-1)
  else:
    cumulative = probs.cumsum(axis=-1)
    u = (rng.uniform(size=len(probs)) if uniform is None
         else np.asarray(uniform, np.float64))
    draws = u[:, None] * cumulative[:, -1:]
    actions = np.minimum((cumulative < draws).sum(axis=-1),
                         probs.shape[-1] - 1)
  chosen = probs[np.arange(len(actions)), actions]
  return actions, np.log(np.maximum(chosen, 1e-30))


class MLPPolicy:
  """The acting function of an MLP policy-value network's weights, with
  `activation` (a `numpy_mlp.ACTIVATIONS` name: the network's, e.g. the
  agent config's `activation`) after each torso layer."""

  def __init__(self, weights: Mapping[str, np.ndarray],
               activation: str = 'relu'):
    if activation not in numpy_mlp.ACTIVATIONS:
      raise ValueError(f'MLPPolicy: activation={activation!r}; choose one of '
                       f'{", ".join(numpy_mlp.ACTIVATIONS)}.')
    self._activation = numpy_mlp.ACTIVATIONS[activation]
    if any(name.startswith('core/') for name in weights):
      raise ValueError('MLPPolicy plays MLP weights; these have an LSTM core '
                       "('core/lstm/...'): play them with "
                       'actor_critic.lstm_policy.LSTMPolicy.')
    self._layers = numpy_mlp.layers(weights, 'torso/mlp/layers')
    self._convs = numpy_mlp.layers(weights, 'torso/convs')  # BoardTorso.
    if not self._layers or 'head/policy/w' not in weights:
      raise ValueError(
          'MLPPolicy needs the weights of PolicyValueNetwork(MLPTorso(...), '
          f'num_actions); got names {sorted(weights)}.')
    self._policy = (np.asarray(weights['head/policy/w'], np.float32),
                    np.asarray(weights['head/policy/b'], np.float32))
    self._value = None  # Optional: acting needs the policy only.
    if 'head/value/w' in weights:
      self._value = (np.asarray(weights['head/value/w'], np.float32),
                     np.asarray(weights['head/value/b'], np.float32))
    self._q = None  # The selfplay network's action values.
    if 'head/q/w' in weights:
      self._q = (np.asarray(weights['head/q/w'], np.float32),
                 np.asarray(weights['head/q/b'], np.float32))

  def __call__(self, observations: np.ndarray
               ) -> Tuple[np.ndarray, np.ndarray]:
    """`[B, *obs]` -> (logits `[B, A]`, values `[B]` or None), unmasked."""
    x = self._embed(observations)
    logits = x @ self._policy[0] + self._policy[1]
    if self._value is None:
      return logits, None
    return logits, (x @ self._value[0] + self._value[1])[:, 0]

  def policy_value(self, observations: np.ndarray, legal: np.ndarray
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """(legal-action probabilities `[B, A]`, state values `[B]`): the value
    head's, or for an action-value head (the selfplay network's) Σ π Q over
    the legal actions, the value the learner trains."""
    x = self._embed(observations)
    probs = legal_probabilities(x @ self._policy[0] + self._policy[1], legal)
    if self._value is not None:
      return probs, (x @ self._value[0] + self._value[1])[:, 0]
    if self._q is None:
      raise ValueError('These weights have no value head (head/value or '
                       'head/q): they give a policy only.')
    return probs, np.sum(probs * (x @ self._q[0] + self._q[1]), axis=-1)

  def _embed(self, observations: np.ndarray) -> np.ndarray:
    x = np.asarray(observations, np.float32)
    if self._convs:
      x = numpy_mlp.board_convs(x, self._convs)
    x = x.reshape(x.shape[0], -1)
    return numpy_mlp.apply(x, self._layers, self._activation,
                           activate_final=True)  # As MLPTorso.

  def probabilities(self, observations: np.ndarray,
                    legal: np.ndarray) -> np.ndarray:
    return legal_probabilities(self(observations)[0], legal)

  def act(self, observations: np.ndarray, legal: np.ndarray,
          rng: Optional[np.random.Generator], greedy: bool = False,
          epsilon: float = 0.0, uniform: Optional[np.ndarray] = None
          ) -> Tuple[np.ndarray, np.ndarray]:
    """Sampled (or greedy) legal actions `[B]` and their log-probs `[B]`.

    With `epsilon`, actions come from (1 - epsilon) π + epsilon uniform over
    the legal actions (exploration), and the log-probs are that mixture's.
    `uniform` ([B] numbers in [0, 1)) replaces the draws from `rng`.
    """
    return sample_legal(self.probabilities(observations, legal), legal, rng,
                        greedy, epsilon, uniform)
