"""Importance-sampling weights for prioritized replay.

Schaul et al. 2016, "Prioritized Experience Replay" (arXiv:1511.05952),
section 3.4; normalised by the batch maximum as in Ape-X (Horgan et al.
2018) and R2D2.
"""

from typing import Union

import tensorflow as tf

from repertory.components.losses import base


def importance_sampling_weights(
    probabilities: tf.Tensor,
    table_size: Union[int, tf.Tensor],
    beta: float,
) -> tf.Tensor:
  """w_i = (N · P(i))^(-β) / max_j w_j over the sampled batch.

  Args:
    probabilities: `[B]` sampling probabilities P(i) > 0 of the sampled items
      (Reverb's `info.probability`).
    table_size: N, the number of items in the table when sampling (an int,
      or Reverb's `info.table_size`, scalar or `[B]`).
    beta: β in [0, 1]; 0 gives weights 1, 1 fully corrects the bias.

  Returns:
    `[B]` float32 weights in (0, 1], no gradient.

  Raises:
    ValueError: if beta is outside [0, 1] or probabilities is not `[B]`;
    InvalidArgumentError (at run time) if a probability is not > 0.
  """
  fn = 'importance_sampling_weights'
  base.check_unit_interval(fn, 'beta', beta)
  probabilities = tf.cast(tf.convert_to_tensor(probabilities), tf.float32)
  base.check_rank(probabilities, 'probabilities', [1], fn)
  table_size = tf.cast(tf.convert_to_tensor(table_size), tf.float32)
  checks = [tf.debugging.assert_positive(
      probabilities,
      message=f'{fn}: every sampling probability must be > 0')]
  with tf.control_dependencies(checks):
    # log w_i = -β log(N P(i)); normalising in log space avoids overflow.
    log_w = -beta * tf.math.log(table_size * probabilities)
    weights = tf.exp(log_w - tf.reduce_max(log_w))
  return tf.stop_gradient(weights)
