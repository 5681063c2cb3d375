"""Feedforward policy-value MLPs in numpy: acting without TensorFlow.

An actor only evaluates the network its learner trains, a few small matrix
products per step. `NumpyPolicy` evaluates the learner's weights
(`networks.get_variables` of the network) with numpy, so an actor process
needs neither TensorFlow nor its start-up:

    policy = NumpyPolicy(seed=0)
    policy.set_weights(weights)           # {'torso/mlp/layers/0/w': ...}
    action, log_prob, value = policy.act(observations)     # [N] each

The networks, told apart by their weights' names:

| network | weights | hidden activation |
|---|---|---|
| PPO/A3C `shared_relu`; IMPALA's feedforward network | `torso/mlp/layers/<i>/{w,b}` (and `value_torso/mlp/layers/<i>/{w,b}` if the value has its own torso), `head/{policy,value}/{w,b}` | `activation` (relu by default) after every torso layer |
| PPO `separate_tanh` | `{policy,value}/layers/<i>/{w,b}` | tanh between layers |

`LogitsPolicy` is the same with IMPALA's step (extras `{'logits'}`);
`EvalActor` acts with a learner's newest weights in one environment (PPO's
and A3C's evaluation actor).

Integer observations are scaled to [0, 1] (divided by 255), as the torsos
do.
"""

import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from repertory import core
from repertory.components import variables

# The variable group actors fetch from the learner (as `mlp_policy.POLICY`
# and `networks.POLICY`, whose modules import TensorFlow).
POLICY = 'policy'

_Layer = Tuple[np.ndarray, np.ndarray]
_INDEXED = re.compile(r'(.+)/(\d+)/w')


def _layers(weights: Mapping[str, np.ndarray], prefix: str) -> List[_Layer]:
  """The `(w, b)` of `<prefix>/<i>/w` for i = 0, 1, ..., in order."""
  found = sorted((int(m.group(2)), name) for name in weights
                 if (m := _INDEXED.fullmatch(name)) and m.group(1) == prefix)
  return [(np.asarray(weights[name], np.float32),
           np.asarray(weights[name[:-1] + 'b'], np.float32))
          for _, name in found]


def _mlp(x: np.ndarray, layers: List[_Layer], activation,
         activate_final: bool) -> np.ndarray:
  for i, (w, b) in enumerate(layers):
    x = x @ w + b
    if activate_final or i < len(layers) - 1:
      x = activation(x)
  return x


ACTIVATIONS = {'relu': lambda x: np.maximum(x, 0.0), 'tanh': np.tanh}


class NumpyPolicy:
  """`mlp_policy.Policy`'s acting step (same `act`, `step` and
  `set_weights`) over the learner's weights, in numpy.

  Actions are sampled from softmax(logits) with a `numpy` generator seeded
  by `seed` (or, with `greedy`, the most likely ones); `log_prob` is
  log softmax(logits)[action].
  """

  def __init__(self, greedy: bool = False, seed: int = 0,
               activation: str = 'relu'):
    if activation not in ACTIVATIONS:
      raise ValueError(f'NumpyPolicy: activation={activation!r}; choose one '
                       f'of {", ".join(ACTIVATIONS)}.')
    self._activation = ACTIVATIONS[activation]
    self._greedy = greedy
    self._rng = np.random.default_rng(seed)
    self._weights: Optional[Dict[str, np.ndarray]] = None
    self._forward = None

  def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
    """Takes `{name: array}` of either network (see the module docstring).

    Raises:
      ValueError: naming the weights, if they are of neither network.
    """
    weights = dict(weights)
    torso = _layers(weights, 'torso/mlp/layers')
    value_torso = _layers(weights, 'value_torso/mlp/layers')
    if torso and 'head/policy/w' in weights and 'head/value/w' in weights:
      head = {k: (np.asarray(weights[f'head/{k}/w'], np.float32),
                  np.asarray(weights[f'head/{k}/b'], np.float32))
              for k in ('policy', 'value')}
      activation = self._activation

      def torso_and_head(x):
        embedding = _mlp(x, torso, activation, activate_final=True)
        value_embedding = (_mlp(x, value_torso, activation, True)
                           if value_torso else embedding)
        return embedding @ head['policy'][0] + head['policy'][1], (
            value_embedding @ head['value'][0] + head['value'][1])
      self._forward = torso_and_head
    else:
      policy = _layers(weights, 'policy/layers')
      value = _layers(weights, 'value/layers')
      if not policy or not value:
        raise ValueError(
            'NumpyPolicy: the weights are of neither a torso/head nor a '
            'separate policy/value MLP (feedforward policy-value networks '
            f'only); got {sorted(weights)}.')
      self._forward = lambda x: (_mlp(x, policy, np.tanh, False),
                                 _mlp(x, value, np.tanh, False))
    self._weights = weights

  def get_weights(self) -> Dict[str, np.ndarray]:
    return dict(self._weights or {})

  def outputs(self, observation: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray]:
    """(logits `[N, A]`, values `[N]`) for `[N, ...]` observations."""
    if self._forward is None:
      raise RuntimeError('NumpyPolicy: set_weights before acting.')
    x = np.asarray(observation)
    if np.issubdtype(x.dtype, np.integer):
      x = x.astype(np.float32) / 255.0
    x = x.astype(np.float32, copy=False).reshape(len(x), -1)
    logits, value = self._forward(x)
    return logits, value[:, 0]

  def act(self, observation: np.ndarray
          ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(action [N] int32, log_prob [N], value [N])` (float32)."""
    logits, value = self.outputs(observation)
    log_probs = _log_softmax(logits.astype(np.float64))
    action = self._sample(log_probs)
    log_prob = log_probs[np.arange(len(action)), action]
    return (action.astype(np.int32), log_prob.astype(np.float32),
            value.astype(np.float32))

  def _sample(self, log_probs: np.ndarray,
              uniform: Optional[np.ndarray] = None) -> np.ndarray:
    """Greedy, or inverse-CDF draws (from `uniform` [N] if given)."""
    if self._greedy:
      return log_probs.argmax(axis=-1)
    if uniform is None:
      uniform = self._rng.random(len(log_probs))
    cumulative = np.exp(log_probs).cumsum(axis=-1)
    draws = np.asarray(uniform, np.float64)[:, None] * cumulative[:, -1:]
    return np.minimum((cumulative <= draws).sum(axis=-1),
                      log_probs.shape[-1] - 1)

  # --- core.Policy (feedforward: no state), for `BatchedActor` ------------

  def initial_state(self, batch_size: int) -> Tuple[()]:
    del batch_size
    return ()

  def step(self, observation: np.ndarray, state: Any, first: Any
           ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Any]:
    """`act` as a `core.Policy` step, extras `{'log_prob', 'value'}`."""
    del first
    action, log_prob, value = self.act(observation)
    return action, {'log_prob': log_prob, 'value': value}, state


def _log_softmax(logits: np.ndarray) -> np.ndarray:
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class LogitsPolicy(NumpyPolicy):
  """`NumpyPolicy` with the step of IMPALA's actors (feedforward networks):
  extras `{'logits': [N, A]}`, the behaviour logits V-trace needs; with
  `uniform` ([N] numbers in [0, 1)) row i's action is drawn from its own
  number, as `networks.Policy.step` does."""

  def step(self, observation: np.ndarray, state: Any, first: Any,
           uniform: Optional[np.ndarray] = None
           ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Any]:
    del first
    logits, _ = self.outputs(observation)
    action = self._sample(_log_softmax(logits.astype(np.float64)), uniform)
    return action.astype(np.int32), {'logits': logits}, state


class EvalActor(core.Actor):
  """One environment, no adder, greedy (or sampled) actions of a
  feedforward network with the learner's newest weights: the run
  monitor's and evaluator's actor for PPO and A3C (no TensorFlow)."""

  def __init__(self, variable_source: Any, greedy: bool = True,
               seed: int = 0):
    self._policy = NumpyPolicy(greedy=greedy, seed=seed)
    self._client = variables.VariableClient(variable_source, POLICY)
    self._version = -1

  def select_action(self, observation: Any) -> Any:
    action, _, _ = self._policy.act(np.asarray(observation)[None])
    return action[0]

  def observe_first(self, timestep: Any) -> None:
    pass

  def observe(self, action: Any, next_timestep: Any) -> None:
    pass

  def update(self, wait: bool = False) -> None:
    self._client.update(wait=wait)
    if self._client.version != self._version and self._client.variables:
      self._policy.set_weights(self._client.params)
      self._version = self._client.version


def make_eval_actor(variable_source: Any, greedy: bool = True,
                    seed: int = 0) -> EvalActor:
  """The monitor's evaluation actor (use with functools.partial)."""
  return EvalActor(variable_source, greedy=greedy, seed=seed)
