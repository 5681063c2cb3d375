"""Epsilon-greedy acting on Q-values: the action rule, Ape-X's per-actor
epsilons, a batched Q-value function for actor nodes and an evaluation actor.

    q = batch_policy(make_network, spec.observations)(observations)  # [B, A]
    actions = epsilon_greedy(q, np.full(len(q), 0.05), rng)
"""

from typing import Any, Callable, Sequence

import dm_env
import numpy as np
import tensorflow as tf

from repertory import core
from repertory.components import networks as networks_lib
from repertory.components import variables as variables_lib
from repertory.components.actors.feed_forward import limit_tf_threads


def apex_epsilon(actor_id: int, num_actors: int, epsilon: float = 0.4,
                 alpha: float = 7.0) -> float:
  """Ape-X's per-actor exploration eps_i = eps ** (1 + alpha * i / (N - 1))
  (Horgan et al. 2018, section 4.1); a single actor gets eps."""
  if not 0 <= actor_id < max(1, num_actors):
    raise ValueError(f'actor_id must be in [0, {num_actors}), got {actor_id}.')
  if num_actors <= 1:
    return float(epsilon)
  return float(epsilon ** (1.0 + alpha * actor_id / (num_actors - 1)))


def epsilon_greedy(q_values: np.ndarray, epsilon: np.ndarray,
                   rng: np.random.RandomState) -> np.ndarray:
  """Per-row epsilon-greedy actions from `[B, A]` Q-values."""
  batch, num_actions = q_values.shape
  greedy = np.argmax(q_values, axis=-1)
  random = rng.randint(num_actions, size=batch)
  explore = rng.uniform(size=batch) < epsilon
  return np.where(explore, random, greedy).astype(np.int32)


def batch_policy(make_network: Callable[[], Any], observation_spec: Any
                 ) -> networks_lib.GraphFunction:
  """The network's Q-values over `[None, ...]` observation batches, numpy
  in and out, in a graph of its own (`GraphFunction`: no TensorFlow objects
  per call, one trace whatever the batch size). `make_network()` builds the
  network without its variables."""
  signature = tf.nest.map_structure(
      lambda s: tf.TensorSpec((None,) + tuple(s.shape), tf.as_dtype(s.dtype)),
      observation_spec)
  return networks_lib.GraphFunction(make_network, lambda net, x: net(x),
                                    [signature])


class GreedyActor(core.Actor):
  """A single-environment actor with the learner's weights (evaluation).

  Its policy is `batch_policy`'s graph (one `Session.run` a step, no
  `EagerTensor` per call). `make_network()` builds the network without its
  variables; the weights come from `variable_source`'s 'policy'.
  """

  def __init__(self, make_network: Callable[[], Any], observation_spec: Any,
               variable_source: Any, epsilon: float, seed: int = 0):
    limit_tf_threads()
    self._policy = batch_policy(make_network, observation_spec)
    self._client = variables_lib.VariableClient(variable_source, 'policy')
    self._epsilon = epsilon
    self._rng = np.random.RandomState(seed)

  def select_action(self, observation) -> np.ndarray:
    batched = tf.nest.map_structure(lambda x: np.asarray(x)[None], observation)
    q_values = self._policy(batched)
    return epsilon_greedy(q_values, np.array([self._epsilon]), self._rng)[0]

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    pass

  def observe(self, action, next_timestep: dm_env.TimeStep) -> None:
    pass

  def update(self, wait: bool = False) -> None:
    version = self._client.version
    self._client.update(wait=wait)
    if self._client.version != version:
      self._policy.set_weights(self._client.params)


def stack(items: Sequence[Any]) -> Any:
  return tf.nest.map_structure(lambda *xs: np.stack(xs), *items)
