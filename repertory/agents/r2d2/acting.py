"""R2D2 acting: a batch of environments per recurrent policy call, per-actor
epsilon, overlapping sequences with the LSTM state stored at each start
(Kapturowski et al. 2019, section 3)."""

import functools
from typing import Any, Callable, List, Mapping

import dm_env
import numpy as np
import tensorflow as tf

from repertory import core
from repertory import environments
from repertory.components import adders
from repertory.components import losses
from repertory.components.actors import epsilon_greedy as eg
from repertory.agents.prioritized_replay import acting as replay_actor
from repertory.components.actors.feed_forward import limit_tf_threads
from repertory.components import networks as networks_lib
from repertory.components import variables as variables_lib



def make_environment(env: str, seed: int) -> dm_env.Environment:
  """The environment with observations OAR(observation, previous action,
  previous reward)."""
  return environments.ObservationActionReward(environments.make(env,
                                                                seed=seed))


def state_to_numpy(state) -> Mapping[str, np.ndarray]:
  """An `snt.LSTMState` as the dict stored in replay."""
  return {'hidden': np.asarray(state.hidden), 'cell': np.asarray(state.cell)}


def _signatures(observation_spec: Any, state_size: int):
  """Input signatures of `_policy_step` over `[None, ...]` batches."""
  obs_signature = tf.nest.map_structure(
      lambda s: tf.TensorSpec((None,) + tuple(s.shape), tf.as_dtype(s.dtype)),
      observation_spec)
  state_signature = {
      'hidden': tf.TensorSpec((None, state_size), tf.float32),
      'cell': tf.TensorSpec((None, state_size), tf.float32)}
  return [obs_signature, state_signature]


def _policy_step(network: Any, oar: Any, state: Mapping[str, Any]):
  """`network(oar, state)` with the state as a {'hidden', 'cell'} dict."""
  import sonnet as snt  # pylint: disable=g-import-not-at-top
  q_values, next_state = network(
      oar, snt.LSTMState(hidden=state['hidden'], cell=state['cell']))
  return q_values, {'hidden': next_state.hidden, 'cell': next_state.cell}


def graph_recurrent_policy(make_network: Callable[[], Any],
                           observation_spec: Any, state_size: int
                           ) -> networks_lib.GraphFunction:
  """`network(oar, state)` over `[None, ...]` batches in a graph of its own,
  numpy in and out (`GraphFunction`: no TensorFlow objects per call); the
  state is passed and returned as a {'hidden', 'cell'} dict.
  `make_network()` builds the network without its variables."""
  return networks_lib.GraphFunction(
      make_network, _policy_step, _signatures(observation_spec, state_size))


class R2D2Priority:
  """A sequence's initial priority from the actor's own Q-values (stored as
  the `q_values` extras): the learner's transformed n-step double-Q TD errors
  over the trace, with the actor's network as online and target network,
  reduced as eta * max|delta| + (1 - eta) * mean|delta|."""

  def __init__(self, config: Any):
    self._burn_in = config.effective_burn_in
    self._n = config.n_step
    self._gamma = config.discount
    self._eta = config.priority_eta
    self._transform = (
        losses.numpy_signed_hyperbolic_transform(config.value_rescaling_eps)
        if config.use_value_rescaling else None)

  def __call__(self, item: Mapping[str, Any]) -> float:
    b = self._burn_in
    q = np.asarray(item['extras']['q_values'], np.float64)[b:]  # [T+1, A]
    actions = np.asarray(item['action'])[b:-1].astype(np.int64)  # [T]
    rewards = np.asarray(item['reward'], np.float64)[b:-1]
    discounts = self._gamma * np.asarray(item['discount'], np.float64)[b:-1]
    step_type = np.asarray(item['step_type'])[b:]
    valid = step_type[:-1] != int(dm_env.StepType.LAST)
    ends = step_type[1:] == int(dm_env.StepType.LAST)  # x_{s+1} is LAST.
    h, h_inv = self._transform or (lambda x: x, lambda x: x)
    num_steps = len(rewards)
    v = h_inv(q[1:].max(axis=-1))  # [T]: the value of x_{s+1}.
    targets = np.zeros(num_steps)  # Untransformed n-step targets.
    for s in range(num_steps):
      # Walk at most n steps, stopping at the end of the episode (where a
      # truncation, discount 1, still bootstraps) or of the trace.
      ret, disc, j = 0.0, 1.0, s
      for _ in range(self._n):
        ret += disc * rewards[j]
        disc *= discounts[j]
        j += 1
        if j == num_steps or ends[j - 1]:
          break
      targets[s] = ret + disc * v[j - 1]
    deltas = np.where(valid, h(targets) - q[:-1][np.arange(num_steps),
                                                 actions], 0.0)
    abs_deltas = np.abs(deltas)
    return float(self._eta * abs_deltas.max() +
                 (1.0 - self._eta) * abs_deltas.mean()) + 1e-6


class R2D2Actor(replay_actor.ReplayActor):
  """Steps `envs_per_actor` environments with one recurrent policy call.

  Each environment has its own `SequenceAdder`; the adder stores the LSTM
  state the policy used at the first step of every sequence. Sequences run
  on across episode boundaries (`EndBehavior.CONTINUE`; the learner zeroes
  the state at FIRST steps), so that traces start at every phase of an
  episode.
  """

  make_environment = staticmethod(make_environment)

  def _make_policy(self, spec: Any, make_network: Callable[..., Any]) -> Any:
    return graph_recurrent_policy(
        lambda: make_network(spec, self._config, build=False),
        spec.observations, self._config.lstm_size)

  def _make_adders(self, replay_client: Any, table: str) -> List[Any]:
    config = self._config
    if config.initial_priority == 'actor':
      priority_fn = R2D2Priority(config)
    else:
      priority_fn = functools.partial(replay_actor.constant_priority,
                                      config.constant_priority)
    return [
        adders.SequenceAdder(
            replay_client, table, sequence_length=config.sequence_length,
            period=config.sequence_period,
            end_of_episode_behavior=adders.EndBehavior.CONTINUE,
            actor_id=self._actor_id, priority_fn=priority_fn,
            max_in_flight_items=config.max_in_flight_items)
        for _ in self._envs]

  def _start(self) -> None:
    num_envs, size = len(self._envs), self._config.lstm_size
    self._state = {'hidden': np.zeros((num_envs, size), np.float32),
                   'cell': np.zeros((num_envs, size), np.float32)}
    super()._start()

  def step(self) -> None:
    """One recurrent policy call, then one step in every environment."""
    if self._client.version < 0:
      self._fetch_weights(wait=True)
    state = self._state
    q_values, next_state = self._policy(
        eg.stack([t.observation for t in self._timesteps]), state)
    num_envs = len(self._envs)
    actions = eg.epsilon_greedy(q_values, np.full(num_envs, self._epsilon),
                             self._rng).astype(self._action_dtype)
    for j, (env, adder) in enumerate(zip(self._envs, self._adders)):
      timestep = env.step(actions[j])
      used_state = {'hidden': state['hidden'][j], 'cell': state['cell'][j]}
      adder.add(actions[j], timestep,
                extras={'q_values': q_values[j]}, core_state=used_state)
      self._record_step(j, timestep.reward)
      if timestep.last():
        self._end_episode(j)
        timestep = env.reset()
        adder.add_first(timestep)
        next_state['hidden'][j] = 0.0
        next_state['cell'][j] = 0.0
      self._timesteps[j] = timestep
    self._state = next_state
    self._after_call(num_envs)


class R2D2EvalActor(core.Actor):
  """A single-environment recurrent actor on plain observations (it builds
  OAR from what it observes) with the learner's weights."""

  def __init__(self, make_network: Callable[[], Any], variable_source: Any,
               epsilon: float, observation_spec: Any, lstm_size: int,
               seed: int = 0):
    limit_tf_threads()
    self._policy = graph_recurrent_policy(make_network, observation_spec,
                                          lstm_size)
    self._client = variables_lib.VariableClient(variable_source, 'policy')
    self._epsilon = epsilon
    self._rng = np.random.RandomState(seed)
    self._zero_state = {'hidden': np.zeros((1, lstm_size), np.float32),
                        'cell': np.zeros((1, lstm_size), np.float32)}
    self._action_dtype = np.dtype(observation_spec.action.dtype)
    self._reward_dtype = np.dtype(observation_spec.reward.dtype)
    self._state = self._zero_state
    self._prev_action = np.zeros((), self._action_dtype)
    self._prev_reward = np.zeros((), self._reward_dtype)

  def select_action(self, observation) -> np.ndarray:
    oar = environments.OAR(np.asarray(observation)[None],
                           self._prev_action[None], self._prev_reward[None])
    q_values, self._state = self._policy(oar, self._state)
    return eg.epsilon_greedy(q_values, np.array([self._epsilon]),
                             self._rng)[0].astype(self._action_dtype)

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    self._state = self._zero_state
    self._prev_action = np.zeros((), self._action_dtype)
    self._prev_reward = np.zeros((), self._reward_dtype)

  def observe(self, action, next_timestep: dm_env.TimeStep) -> None:
    self._prev_action = np.asarray(action, self._action_dtype)
    self._prev_reward = np.asarray(next_timestep.reward or 0.0,
                                   self._reward_dtype)

  def update(self, wait: bool = False) -> None:
    version = self._client.version
    self._client.update(wait=wait)
    if self._client.version != version:
      self._policy.set_weights(self._client.params)


def make_eval_actor(spec: Any, config: Any,
                    make_network: Callable[[Any, Any], Any],
                    variable_source: Any, seed: int = 0) -> core.Actor:
  """Builds the evaluation actor (picklable through functools.partial);
  `spec` is the OAR-wrapped environment's (`program.environment_spec`)."""
  return R2D2EvalActor(lambda: make_network(spec, config, build=False),
                       variable_source, config.eval_epsilon,
                       spec.observations, config.lstm_size, seed=seed)
