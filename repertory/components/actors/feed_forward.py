"""A feedforward policy acting with a learner's versioned weights."""

from typing import Any, Callable, Union

import dm_env
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory import core
from repertory.components import networks
from repertory.components import variables


def limit_tf_threads() -> None:
  """One intra-op and one inter-op thread: many actors share few cores.

  Call it before TensorFlow runs anything in the process; once it has (the
  one-process launch types), it changes nothing.
  """
  try:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
  except RuntimeError:  # TF already initialised in this process (threads).
    pass


class FeedForwardActor(core.Actor):
  """Acts on the logits of a Sonnet network with a learner's weights.

  `act(observations [N, ...])` returns `[N]` int32 actions from one compiled
  call (as a `core.Policy`, `step` is `act`: a `BatchedActor` runs it); `select_action(observation)` is the same on
  one observation, so the actor is also the single-environment evaluation
  actor `experiment.add_monitor` asks for. It records nothing (no adder).
  Building one calls `limit_tf_threads()`: in a process where TensorFlow has
  not run yet (an actor's), TensorFlow then uses one thread per op pool.

  Example::

    network = networks.PolicyValueNetwork(torso, num_actions=3)
    network(dummy_batch)              # Creates the variables.
    actor = FeedForwardActor(network, learner, 'policy', greedy=False)
    actor.update(wait=True)           # Weights of version actor.version.
    actions = actor.act(timestep.observation)

  The run monitor's evaluation actor is then one picklable partial that
  builds the network in the monitor's process:
  `functools.partial(FeedForwardActor, functools.partial(make_network, ...))`.

  Args:
    network: a Sonnet module mapping `[N, ...]` observations to logits
      `[N, A]`, or to an output with a `logits` field (`PolicyValueOutput`),
      whose variables exist (call it once on a dummy batch); or a function
      without arguments returning one.
    variable_source: the learner (handle) serving the weights as
      `variable_name`; None acts with the network's own weights.
    variable_name: the variable group holding the network's weights.
    greedy: take the most likely action instead of sampling.
    update_period: fetch new weights every this many `update()` calls.
    seed: seeds action sampling.
  """

  def __init__(self,
               network: Union[snt.Module, Callable[[], snt.Module]],
               variable_source: Any = None,
               variable_name: str = 'policy',
               greedy: bool = True,
               update_period: int = 1,
               seed: int = 0):
    limit_tf_threads()
    if not isinstance(network, tf.Module):
      network = network()
    networks.named_variables(network)  # A clear error if none exist yet.
    self.network = network
    self._client = None if variable_source is None else (
        variables.VariableClient(variable_source, variable_name,
                                 update_period=update_period))
    self._version = -1 if variable_source is not None else 0
    rng = tf.random.Generator.from_seed(seed)

    def sample(observations):
      logits = network(observations)
      logits = getattr(logits, 'logits', logits)
      if greedy:  # A Python branch, decided when tracing.
        return tf.argmax(logits, axis=-1, output_type=tf.int32)
      return tf.random.stateless_categorical(
          logits, 1, rng.make_seeds(1)[:, 0], dtype=tf.int32)[:, 0]

    self._sample = tf.function(sample, autograph=False)

  @property
  def version(self) -> int:
    """The policy version of the weights acted with (-1 before the first
    `update` with a variable source; 0 without one)."""
    return self._version

  def act(self, observations: Any) -> np.ndarray:
    """`[N]` int32 actions for a batch of observations."""
    return self._sample(observations).numpy()

  # --- core.Policy (feedforward: no state), for `BatchedActor` ------------

  def initial_state(self, batch_size: int) -> Any:
    del batch_size
    return ()

  def step(self, observation: Any, state: Any, first: Any) -> Any:
    """`act` as a `core.Policy` step: `(actions, extras, ())`; extras are
    `{}` unless `act` returns `(actions, extras)`."""
    del first
    action = self.act(observation)
    if isinstance(action, tuple):
      return action[0], action[1], state
    return action, {}, state

  def set_weights(self, weights: Any) -> None:
    networks.assign_variables(self.network, weights)

  def select_action(self, observation: Any) -> np.ndarray:
    return self.act(np.asarray(observation)[None])[0]

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    pass

  def observe(self, action: Any, next_timestep: dm_env.TimeStep) -> None:
    pass

  def update(self, wait: bool = False) -> None:
    if self._client is None:
      return
    self._client.update(wait=wait)
    if self._client.version != self._version and self._client.variables:
      networks.assign_variables(self.network, self._client.params)
      self._version = self._client.version

  def close(self) -> None:
    """Stops the background weight fetches."""
    if self._client is not None:
      self._client.close()
