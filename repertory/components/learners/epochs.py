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
"""

from typing import Any, Callable, Dict

import numpy as np
import tensorflow as tf


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
  """

  def __init__(self, step: Callable[..., Dict[str, tf.Tensor]],
               num_epochs: int, num_minibatches: int, seed: int = 0,
               min_size: int = 1):
    self._step = step
    self._num_epochs, self._num_minibatches = num_epochs, num_minibatches
    self._min_size = min_size
    self._rng = np.random.RandomState(seed)
    index = lambda *shape: tf.TensorSpec(shape, tf.int32)
    self._run = tf.function(
        self._run_impl, autograph=False, input_signature=[
            index(None, None), index(None), index(None),
            *step.input_signature])

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

    first, skipped = update(tf.constant(0))
    _, sums, skipped = tf.while_loop(
        lambda i, *_: i < tf.shape(order)[0] * parts,
        lambda i, sums, skipped: (i + 1,) + tuple(
            a + b for a, b in zip((sums, skipped), update(i))),
        (tf.constant(1), first, skipped))
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
