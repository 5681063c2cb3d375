"""Runs a function of a Sonnet module in a TF graph of its own.

TensorFlow 2.15 on CPython 3.11 leaks a small block per `EagerTensor`: an
actor that calls a `tf.function` policy every step grows without bound.
`GraphFunction` traces the function once into a finalized `tf.Graph` and
runs it with `Session.run` on numpy arrays, which creates no Python objects
that outlive the call.
"""

from typing import Any, Callable, Dict, Mapping, Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf
import tree

from repertory.components.networks import variables as variables_lib
from repertory.launch.process import tf_internals


class GraphFunction:
  """Runs a function of a Sonnet module in a graph of its own: numpy in,
  numpy out, without creating one `EagerTensor` per call.

  Why: with TensorFlow 2.15 on CPython 3.11 every `EagerTensor` leaks one
  48-byte block when it is freed (its managed `__dict__` values are never
  released), so an acting loop that calls a `tf.function` per step grows
  with every step. A TF1-style
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
      self._variables = variables_lib.named_variables(module)
      self._assign_inputs = {
          name: tf.compat.v1.placeholder(v.dtype.base_dtype, v.shape)
          for name, v in self._variables.items()}
      self._assign = tf.group(*[
          v.assign(self._assign_inputs[name])
          for name, v in self._variables.items()])
      initialize = tf.compat.v1.variables_initializer(
          list(self._variables.values()))
    self._graph.finalize()
    # inter_op_parallelism_threads < 0: the ops run on the calling thread.
    # With a pool thread each call hands off to it and back; when the
    # scheduler puts that thread on another core (an actor alone on an idle
    # machine), the wake-ups cost an actor much of its steps/s.
    self._session = tf.compat.v1.Session(
        graph=self._graph, config=tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=1, inter_op_parallelism_threads=-1))
    self._session.run(initialize)
    self._flat_inputs = tree.flatten(self._inputs)
    # Session.run rebuilds its fetch and feed bookkeeping on every call (two
    # thirds of a small policy's call time); the session's own runner is
    # called with it built once (a private TensorFlow name: tf_internals).
    self._run = tf_internals.session_runner(
        self._session, self._flat_inputs, tree.flatten(self._outputs))
    self._feed_dtypes = [t.dtype.as_numpy_dtype for t in self._flat_inputs]

  @property
  def variable_names(self) -> Sequence[str]:
    return list(self._variables)

  def __call__(self, *inputs: Any) -> Any:
    values = tree.flatten(list(inputs))
    if len(values) != len(self._feed_dtypes):
      raise ValueError(f'GraphFunction: expected {len(self._feed_dtypes)} '
                       f'input arrays, got {len(values)}.')
    results = self._run([np.asarray(value, dtype) for value, dtype in
                         zip(values, self._feed_dtypes)])
    return tree.unflatten_as(self._outputs, results)

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
