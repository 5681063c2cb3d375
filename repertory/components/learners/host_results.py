"""Results of a `tf.function` handed to Python as numpy, with no EagerTensor.

TensorFlow 2.15 on CPython 3.11 leaks one 48-byte block per `EagerTensor`
(see `repertory.components.networks.GraphFunction`). A learner that takes
each batch from a dataset iterator in Python, returns its metrics from a
`tf.function` and reads its weights with `.numpy()` creates dozens of them
per step, and grows steadily. With `HostResults` the
step takes the iterator as an argument, returns nothing, and sends what
Python needs through one `tf.numpy_function`, which passes numpy arrays:

    results = HostResults()

    @tf.function
    def train_step(iterator):
      batch = next(iterator)
      metrics = sgd_step(batch)
      results.send({'metrics': metrics, 'weights': network.variables})

    train_step(iterator)
    metrics = results.take()['metrics']     # numpy
"""

from typing import Any

import numpy as np
import tensorflow as tf


class HostResults:
  """Carries a nest of tensors out of a `tf.function` as numpy copies."""

  def __init__(self):
    self._value = None

  def send(self, nest: Any) -> None:
    """Inside a `tf.function`: when the op runs, `nest` is copied to numpy
    for the next `take()`. Variables are read; Python scalars allowed."""
    flat = [v.read_value() if isinstance(v, tf.Variable) else v
            for v in tf.nest.flatten(nest)]

    def receive(*arrays):
      self._value = tf.nest.pack_sequence_as(
          nest, [np.array(a, copy=True) for a in arrays])

    tf.numpy_function(receive, flat, Tout=[], stateful=True)

  def take(self) -> Any:
    """The nest the last `send` delivered (None if nothing was sent since
    the previous `take`)."""
    value, self._value = self._value, None
    return value
