"""Epochs of shuffled minibatch updates, in one `tf.function` call.

    step = tf.function(minibatch_step, input_signature=[...], autograph=False)
    epochs = MinibatchEpochs(step, num_epochs=10, num_minibatches=4, seed=0)
    metrics = epochs(observation, action, advantages)  # arrays [N, ...]

PPO's inner loop (Schulman et al. 2017, Algorithm 1): every epoch shuffles
the N samples, splits them into `num_minibatches` parts as
`np.array_split` does, and `step` updates on each part in turn. The
shuffles come from a NumPy generator on the host, so a run draws the same
minibatches as a Python loop over `step` would; the loop itself runs in
the graph (`tf.while_loop`), which saves a call, its dispatch and a host
sync per minibatch (most of an update's time with small networks).

`step` takes the minibatch's arrays and returns a dict of scalar tensors,
with a bool 'applied' (False: a non-finite update that was skipped,
`apply_if_finite`). The result holds the mean of every other metric over
the updates, 'updates' (their number), 'skipped' (not applied), and each
metric of the first update as 'first/<name>' (taken before any update of
the batch, e.g. PPO's KL, which is then ~0 at policy lag 0).

The first `unoptimized_calls` calls run the loop's graph without Grappler,
which instantiates it sooner, while a thread prepares the optimised graph
with a call of no epochs, which updates nothing
(`graph_options.OptimizedLater`): the learner's first update does not wait
for the optimiser.
"""

from typing import Any, Callable, Dict, Tuple

import numpy as np
import tensorflow as tf

from repertory.components.learners import graph_options


class MinibatchEpochs:
  """`num_epochs` x `num_minibatches` calls of `step`, one graph per batch.

  Args:
    step: a `tf.function` with an input signature of `[None, ...]` arrays
      (traced once; the loop calls its graph), returning a dict with a
      bool 'applied'.
    num_epochs: passes over the batch.
    num_minibatches: parts of each shuffled pass.
    seed: of the host's shuffles.
    min_size: parts with fewer samples are left out (in every epoch).
    unoptimized_calls: calls that run the graph unoptimised while the
      optimised one is prepared in a thread (0: optimised from the first).
  """

  def __init__(self, step: Callable[..., Dict[str, tf.Tensor]],
               num_epochs: int, num_minibatches: int, seed: int = 0,
               min_size: int = 1, unoptimized_calls: int = 10):
    self._step = step
    self._num_epochs, self._num_minibatches = num_epochs, num_minibatches
    self._min_size = min_size
    self._rng = np.random.RandomState(seed)
    index = lambda *shape: tf.TensorSpec(shape, tf.int32)
    self._run = graph_options.OptimizedLater(
        tf.function(self._run_impl, autograph=False, input_signature=[
            index(None, None), index(None), index(None),
            *step.input_signature]),
        self._no_op_inputs, unoptimized_calls)

  def _run_impl(self, order, starts, ends, *arrays):
    """Every (epoch, part) pair in turn; returns (sums, first, skipped)."""
    parts = tf.shape(starts)[0]
    structure = self._step.get_concrete_function().structured_outputs
    names = sorted(k for k in structure if k != 'applied')

    def update(i):
      epoch, part = i // parts, i % parts
      rows = order[epoch, starts[part]:ends[part]]
      metrics = self._step(*(tf.gather(x, rows) for x in arrays))
      values = tf.stack([tf.cast(metrics[k], tf.float32) for k in names])
      return values, tf.cast(tf.logical_not(metrics['applied']), tf.int32)

    total = tf.shape(order)[0] * parts
    zeros = tf.zeros([len(names)])

    def body(i, sums, first, skipped):
      values, bad = update(i)  # Traced once: one call of `step` in the graph.
      first = tf.where(tf.equal(i, 0), values, first)
      return i + 1, sums + values, first, skipped + bad

    # A call with no epochs updates nothing (`_no_op_inputs`).
    _, sums, first, skipped = tf.while_loop(
        lambda i, *_: i < total, body,
        (tf.constant(0), zeros, zeros, tf.constant(0)))
    return dict(zip(names, tf.unstack(sums))), dict(
        zip(names, tf.unstack(first))), skipped

  def __call__(self, *arrays: np.ndarray) -> Dict[str, Any]:
    n = len(arrays[0])
    bounds = np.cumsum([0] + [len(part) for part in np.array_split(
        np.arange(n), self._num_minibatches)])
    kept = [(a, b) for a, b in zip(bounds[:-1], bounds[1:])
            if b - a >= self._min_size]
    orders = np.stack([self._rng.permutation(n)
                       for _ in range(self._num_epochs)]).astype(np.int32)
    if not kept:
      return {'updates': 0, 'skipped': 0}
    starts, ends = (np.array(x, np.int32) for x in zip(*kept))
    sums, first, skipped = self._run(orders, starts, ends, *arrays)
    updates = self._num_epochs * len(kept)
    out = {k: float(v) / updates for k, v in sums.items()}
    out.update({f'first/{k}': float(v) for k, v in first.items()})
    out.update(updates=updates, skipped=int(skipped))
    return out

  def _no_op_inputs(self) -> Tuple[np.ndarray, ...]:
    """No epochs: a call that instantiates the graph and updates nothing."""
    empty = lambda spec: np.zeros([0] + [d or 0 for d in spec.shape[1:]],
                                  spec.dtype.as_numpy_dtype)
    return (np.zeros((0, 0), np.int32), np.zeros(1, np.int32),
            np.zeros(1, np.int32),
            *(empty(spec) for spec in self._step.input_signature))
