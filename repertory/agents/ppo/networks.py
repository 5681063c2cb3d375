"""PPO's (and A3C's) feedforward policy-value network and its acting step.

`Policy` is the one compiled function actors need: a batched step over all
of an actor's environments that samples actions and returns their
log-probabilities and the state values, which on-policy learners store with
the experience (PPO) or use at once (A3C).
"""

from typing import Any, Callable, Dict, Mapping, Sequence, Tuple

from dm_env import specs
import numpy as np
import sonnet as snt
import tensorflow as tf
import tree

from repertory.agents.impala.networks import environment_specs  # pylint: disable=unused-import
from repertory.agents.impala.networks import num_actions
from repertory.components import losses
from repertory.components import networks

# The name of the variable group actors fetch from the learner.
POLICY = 'policy'


def make_network(hidden_sizes: Sequence[int], observation_spec: specs.Array,
                 action_spec: specs.Array) -> networks.PolicyValueNetwork:
  """Builds an MLP policy-value network and creates its variables."""
  obs_rank = max(len(observation_spec.shape), 1)
  network = networks.PolicyValueNetwork(
      networks.MLPTorso(tuple(hidden_sizes), obs_rank=obs_rank),
      num_actions=num_actions(action_spec))
  network(tf.zeros((1,) + tuple(observation_spec.shape),
                   tf.as_dtype(observation_spec.dtype)))
  return network


class GraphFunction:
  """Runs a function of a Sonnet module in a graph of its own: numpy in,
  numpy out, without creating one `EagerTensor` per call.

  Why: with TensorFlow 2.15 on CPython 3.11 every `EagerTensor` leaks one
  48-byte block when it is freed (its managed `__dict__` values are never
  released), so an acting loop that calls a `tf.function` per step grows by
  a few hundred bytes per step (measured: 4 blocks, ~190 B RSS per PPO
  policy call; an IMPALA actor ~6.5 MiB per 10 minutes). A TF1-style
  `Session.run` on a finalized graph feeds and returns numpy arrays and
  allocates no Python objects that outlive the call; it is also faster at
  small batch sizes.

    function = GraphFunction(
        lambda: networks.PolicyValueNetwork(networks.MLPTorso((64,)), 3),
        lambda net, obs: net(obs).logits,
        [tf.TensorSpec((None, 4), tf.float32)])
    function.set_weights(networks.get_variables(trained_network))
    logits = function(observations)          # numpy

  Args:
    make_module: builds the module (Sonnet needs eager mode to construct
      it); its variables are created inside the graph, named as in an eager
      twin, so `set_weights` takes `networks.get_variables(eager_twin)`.
    fn: `fn(module, *inputs) -> nest of tensors`, traced once.
    input_signature: one `tf.TensorSpec` (or nest of them) per input.
  """

  def __init__(self, make_module: Callable[[], snt.Module],
               fn: Callable[..., Any], input_signature: Sequence[Any]):
    module = make_module()
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._inputs = [
          tree.map_structure(
              lambda spec: tf.compat.v1.placeholder(spec.dtype, spec.shape),
              signature) for signature in input_signature]
      self._outputs = fn(module, *self._inputs)
      self._variables = networks.named_variables(module)
      self._assign_inputs = {
          name: tf.compat.v1.placeholder(v.dtype.base_dtype, v.shape)
          for name, v in self._variables.items()}
      self._assign = tf.group(*[
          v.assign(self._assign_inputs[name])
          for name, v in self._variables.items()])
      initialize = tf.compat.v1.variables_initializer(
          list(self._variables.values()))
    self._graph.finalize()
    self._session = tf.compat.v1.Session(
        graph=self._graph, config=tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=1, inter_op_parallelism_threads=1))
    self._session.run(initialize)
    self._flat_inputs = tree.flatten(self._inputs)

  @property
  def variable_names(self) -> Sequence[str]:
    return list(self._variables)

  def __call__(self, *inputs: Any) -> Any:
    feed = dict(zip(self._flat_inputs, tree.flatten(list(inputs))))
    return self._session.run(self._outputs, feed)

  def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
    """Assigns `{name: array}` (e.g. a learner's `get_variables`)."""
    missing = set(self._variables) - set(weights)
    if missing:
      raise KeyError(f'set_weights: no values for {sorted(missing)}; got '
                     f'{sorted(weights)}.')
    self._session.run(self._assign, {
        self._assign_inputs[name]: weights[name] for name in self._variables})

  def get_weights(self) -> Dict[str, np.ndarray]:
    return self._session.run(self._variables)

  def close(self) -> None:
    self._session.close()


def unbuilt_network(hidden_sizes: Sequence[int],
                    observation_spec: specs.Array,
                    action_spec: specs.Array) -> networks.PolicyValueNetwork:
  """`make_network`'s module before its variables exist."""
  return networks.PolicyValueNetwork(
      networks.MLPTorso(tuple(hidden_sizes),
                        obs_rank=max(len(observation_spec.shape), 1)),
      num_actions=num_actions(action_spec))


class Policy:
  """The policy-value network's batched acting step (see `GraphFunction`:
  it runs in a graph of its own, so acting creates no `EagerTensor`s).

  `step(observation [N, ...])` returns numpy `(action [N] int32,
  log_prob [N], value [N])`: actions are sampled (or, with `greedy`, the most
  likely ones), log_prob is log π(action | observation). `set_weights` takes
  the learner's `{name: array}` (`networks.get_variables` of the network
  `make_network` builds); until then the weights are freshly initialised.
  """

  def __init__(self, hidden_sizes: Sequence[int],
               observation_spec: specs.Array, action_spec: specs.Array,
               greedy: bool = False, seed: int = 0):
    self._rng = np.random.RandomState(seed)

    def step(network, observation, sample_seed):
      output = network(observation)
      logits, value = output.logits, output.value
      if greedy:
        action = tf.argmax(logits, axis=-1, output_type=tf.int32)
      else:
        action = tf.random.stateless_categorical(
            logits, 1, sample_seed, dtype=tf.int32)[:, 0]
      return action, losses.categorical_log_prob(logits, action), value

    self._function = GraphFunction(
        lambda: unbuilt_network(hidden_sizes, observation_spec, action_spec),
        step,
        [tf.TensorSpec((None,) + tuple(observation_spec.shape),
                       tf.as_dtype(observation_spec.dtype)),
         tf.TensorSpec((2,), tf.int64)])

  def step(self, observation: np.ndarray
           ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    seed = self._rng.randint(0, 2**31 - 1, size=2, dtype=np.int64)
    action, log_prob, value = self._function(np.asarray(observation), seed)
    return action, log_prob, value

  def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
    self._function.set_weights(weights)

  def get_weights(self) -> Dict[str, np.ndarray]:
    return self._function.get_weights()


def export_snapshot(path: str, network: snt.Module,
                    observation_spec: specs.Array) -> str:
  """Exports `network`'s greedy policy as a SavedModel at `path`.

  The snapshot runs without the training code:
  `python -m repertory.evaluate --snapshot=<path> --env=...`.
  """
  from repertory.components import model_store  # pylint: disable=g-import-not-at-top

  def policy(observation):
    return tf.argmax(network(observation).logits, axis=-1,
                     output_type=tf.int32)
  return model_store.export_policy(path, policy, observation_spec,
                                   owner=network)
