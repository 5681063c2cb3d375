"""Policy-value networks in numpy: acting without TensorFlow.

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
| IMPALA's network over MinAtar boards (`Config.torso='minatar'`) | `torso/conv/{w,b}`, `torso/linear/{w,b}` (`networks.MinAtarTorso`; likewise `value_torso/...`), `head/{policy,value}/{w,b}` | ReLU |
| PPO `separate_tanh` | `{policy,value}/layers/<i>/{w,b}` | tanh between layers |
| IMPALA's `use_lstm` network (`LogitsPolicy(lstm_size=...)`) | the torso's and head's, and `core/lstm/{w_i,w_h,b}` (Sonnet's `snt.LSTM`) between them | `activation` in the torso |

`LogitsPolicy` is the same with IMPALA's step (extras `{'logits'}`, and
the LSTM's state);
`EvalActor` acts with a learner's newest weights in one environment (PPO's
and A3C's evaluation actor).

Integer observations are scaled to [0, 1] (divided by 255), as the torsos
do.
"""

from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from repertory import core
from repertory.components import numpy_mlp
from repertory.components import variables

# The variable group actors fetch from the learner (as `mlp_policy.POLICY`
# and `networks.POLICY`, whose modules import TensorFlow).
POLICY = 'policy'

def sample_from_uniform(logits: np.ndarray, uniform: np.ndarray
                        ) -> np.ndarray:
  """Categorical actions `[N]` (int32) of `logits` `[N, A]` (or log-probs)
  by inverse CDF: row i takes the first action whose cumulative probability
  exceeds `uniform[i]` (in [0, 1))."""
  logits = np.asarray(logits, np.float64)
  probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
  cdf = np.cumsum(probs, axis=-1)
  below = cdf <= np.asarray(uniform, np.float64)[:, None] * cdf[:, -1:]
  return np.minimum(below.sum(axis=-1), logits.shape[-1] - 1).astype(np.int32)


class NumpyPolicy:
  """The acting step of a policy-value network over the learner's weights,
  in numpy (`act`, and `step` for `BatchedActor`).

  Actions are sampled from softmax(logits) with a `numpy` generator seeded
  by `seed` (or, with `greedy`, the most likely ones); `log_prob` is
  log softmax(logits)[action].
  """

  def __init__(self, greedy: bool = False, seed: int = 0,
               activation: str = 'relu'):
    if activation not in numpy_mlp.ACTIVATIONS:
      raise ValueError(f'NumpyPolicy: activation={activation!r}; choose one '
                       f'of {", ".join(numpy_mlp.ACTIVATIONS)}.')
    self._activation = numpy_mlp.ACTIVATIONS[activation]
    self._greedy = greedy
    self._rng = np.random.default_rng(seed)
    self._weights: Optional[Dict[str, np.ndarray]] = None
    self._forward = None

  def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
    """Takes `{name: array}` of a network of the module docstring.

    Raises:
      ValueError: naming the weights, if they are of no such network.
    """
    weights = dict(weights)
    torso = _torso(weights, 'torso', self._activation)
    value_torso = _torso(weights, 'value_torso', self._activation)
    if torso and 'head/policy/w' in weights and 'head/value/w' in weights:
      head = {k: (np.asarray(weights[f'head/{k}/w'], np.float32),
                  np.asarray(weights[f'head/{k}/b'], np.float32))
              for k in ('policy', 'value')}
      lstm = None
      if 'core/lstm/w_i' in weights:
        lstm = [np.asarray(weights[f'core/lstm/{k}'], np.float32)
                for k in ('w_i', 'w_h', 'b')]

      def torso_and_head(x, state):
        embedding = torso(x)
        if lstm is not None:
          if state is None:
            raise ValueError('NumpyPolicy: an LSTM network needs its state: '
                             'act with LogitsPolicy.step.')
          state = _lstm_step(embedding, state, *lstm)
          embedding = state.hidden
        value_embedding = value_torso(x) if value_torso else embedding
        return (embedding @ head['policy'][0] + head['policy'][1],
                value_embedding @ head['value'][0] + head['value'][1], state)
      self._forward = torso_and_head
    else:
      policy = numpy_mlp.layers(weights, 'policy/layers')
      value = numpy_mlp.layers(weights, 'value/layers')
      if not policy or not value:
        raise ValueError(
            'NumpyPolicy: the weights are of neither a torso/head network '
            '(with or without an LSTM core) nor a separate policy/value '
            f'MLP; got {sorted(weights)}.')
      tanh = numpy_mlp.ACTIVATIONS['tanh']
      flat = lambda x: x.reshape(len(x), -1)
      self._forward = lambda x, state: (
          numpy_mlp.apply(flat(x), policy, tanh, activate_final=False),
          numpy_mlp.apply(flat(x), value, tanh, activate_final=False), state)
    self._weights = weights

  def get_weights(self) -> Dict[str, np.ndarray]:
    return dict(self._weights or {})

  def outputs(self, observation: np.ndarray, state: Any = None
              ) -> Tuple[np.ndarray, np.ndarray]:
    """(logits `[N, A]`, values `[N]`) for `[N, ...]` observations (and,
    for an LSTM network, the state before this step; see `step`)."""
    logits, value, _ = self._evaluate(observation, state)
    return logits, value

  def _evaluate(self, observation: np.ndarray, state: Any
                ) -> Tuple[np.ndarray, np.ndarray, Any]:
    if self._forward is None:
      raise RuntimeError('NumpyPolicy: set_weights before acting.')
    x = np.asarray(observation)
    if np.issubdtype(x.dtype, np.integer):
      x = x.astype(np.float32) / 255.0
    x = x.astype(np.float32, copy=False)
    logits, value, state = self._forward(x, state)
    return logits, value[:, 0], state

  def act(self, observation: np.ndarray
          ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(action [N] int32, log_prob [N], value [N])` (float32)."""
    logits, value = self.outputs(observation)
    log_probs = _log_softmax(logits.astype(np.float64))
    action = self._sample(log_probs)
    log_prob = log_probs[np.arange(len(action)), action]
    return (action.astype(np.int32), log_prob.astype(np.float32),
            value.astype(np.float32))

  def _sample(self, logits: np.ndarray,
              uniform: Optional[np.ndarray] = None) -> np.ndarray:
    """Greedy, or inverse-CDF draws (from `uniform` [N] if given), of
    `logits` (or log-probabilities) `[N, A]`."""
    if self._greedy:
      return logits.argmax(axis=-1)
    if uniform is None:
      uniform = self._rng.random(len(logits))
    return sample_from_uniform(logits, uniform)

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


def _torso(weights: Mapping[str, np.ndarray], prefix: str,
           activation: Any) -> Optional[Any]:
  """The numpy torso `<prefix>` of `weights` (`[N, ...]` observations ->
  `[N, D]`): a `networks.MinAtarTorso` ('<prefix>/conv/w') or an
  `MLPTorso` over the flattened observation; None if there is neither."""
  if f'{prefix}/conv/w' in weights:
    return lambda x: numpy_mlp.minatar_torso(x, weights, prefix)
  layers = numpy_mlp.layers(weights, f'{prefix}/mlp/layers')
  if not layers:
    return None
  return lambda x: numpy_mlp.apply(x.reshape(len(x), -1), layers, activation,
                                   activate_final=True)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class LSTMState(NamedTuple):
  """An LSTM's state (as `snt.LSTMState`), `[N, lstm_size]` each."""
  hidden: np.ndarray
  cell: np.ndarray


def lstm_state_spec(lstm_size: int) -> LSTMState:
  """One environment's LSTM state as numpy examples (an adder's spec)."""
  return LSTMState(hidden=np.zeros((lstm_size,), np.float32),
                   cell=np.zeros((lstm_size,), np.float32))


def _sigmoid(x: np.ndarray) -> np.ndarray:
  return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _lstm_step(x: np.ndarray, state: LSTMState, w_i: np.ndarray,
               w_h: np.ndarray, b: np.ndarray) -> LSTMState:
  """One step of Sonnet 2's `snt.LSTM` (gates i, f, g, o; its forget bias
  is part of `b`)."""
  i, f, g, o = np.split(x @ w_i + state.hidden @ w_h + b, 4, axis=1)
  cell = _sigmoid(f) * state.cell + _sigmoid(i) * np.tanh(g)
  return LSTMState(hidden=_sigmoid(o) * np.tanh(cell), cell=cell)


class LogitsPolicy(NumpyPolicy):
  """`NumpyPolicy` with the step of IMPALA's actors, `networks.Policy`'s:
  extras `{'logits': [N, A]}`, the behaviour logits V-trace needs; with
  `uniform` ([N] numbers in [0, 1)) row i's action is drawn from its own
  number. With `lstm_size` the network has an LSTM core (IMPALA's
  `--config.use_lstm`): `step` takes the state before the step and zeroes
  the rows where `first` holds (an episode starts there)."""

  def __init__(self, greedy: bool = False, seed: int = 0,
               activation: str = 'relu', lstm_size: Optional[int] = None):
    super().__init__(greedy=greedy, seed=seed, activation=activation)
    self._lstm_size = lstm_size

  def initial_state(self, batch_size: int) -> Any:
    if not self._lstm_size:
      return ()
    zeros = np.zeros((batch_size, self._lstm_size), np.float32)
    return LSTMState(hidden=zeros, cell=zeros.copy())

  def step(self, observation: np.ndarray, state: Any, first: Any,
           uniform: Optional[np.ndarray] = None
           ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Any]:
    if self._lstm_size:
      keep = ~np.asarray(first, bool)[:, None]
      state = LSTMState(hidden=state.hidden * keep, cell=state.cell * keep)
    logits, _, next_state = self._evaluate(observation, state)
    action = self._sample(logits, uniform)
    return (action.astype(np.int32), {'logits': logits},
            next_state if self._lstm_size else state)


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

