"""AlphaZero's loss (Silver et al. 2018, Science 362:1140, eq. 1).

    l = (z - v)² - π_searchᵀ log p + c ||θ||²

over positions s, each with the search's visit distribution π_search(·|s)
(the policy target), z the game's final outcome for the player to move at
s (the value target), and the network's move probabilities p(·|s) and value
v(s). Here p is the softmax over the legal moves only (the search never
visits an illegal one), the value term has weight `value_cost`, and the L2
term is the caller's (the learner's weight decay). Positions are a batch
`[B, ...]`, not a time axis.
"""

import tensorflow as tf

from repertory.components.losses import base

_NEG_INF = -1e9


def alphazero_loss(logits: tf.Tensor, value: tf.Tensor,
                   search_policy: tf.Tensor, outcome: tf.Tensor,
                   legal: tf.Tensor, value_cost: float = 1.0
                   ) -> base.LossOutput:
  """The policy cross-entropy plus `value_cost` times the value error.

  Args:
    logits: `[B, A]` the network's move logits (unmasked).
    value: `[B]` its value of each position for the player to move.
    search_policy: `[B, A]` the search's visit distribution (sums to 1,
      zero on illegal moves).
    outcome: `[B]` the game's final return for the player to move.
    legal: `[B, A]` 1 for legal moves, 0 for illegal ones.
    value_cost: the weight of the squared value error.

  Returns:
    The mean loss over the batch; extras 'policy_loss' (the cross-entropy),
    'value_loss' (the mean squared error) and 'policy_kl' (KL(π_search ||
    p), the cross-entropy less the target's entropy: 0 when p matches).
  """
  fn = 'alphazero_loss'
  logits, value, search_policy, outcome, legal = (
      base.to_float(x, n) for x, n in ((logits, 'logits'), (value, 'value'),
                                       (search_policy, 'search_policy'),
                                       (outcome, 'outcome'), (legal, 'legal')))
  base.check_rank(logits, 'logits', [2], fn)
  base.check_same_shape(fn, logits=logits, search_policy=search_policy,
                        legal=legal)
  base.check_same_shape(fn, value=value, outcome=outcome)
  base.check_shape(fn, 'value', value, logits.shape[:1], 'one per position')
  masked = tf.where(legal > 0, logits, tf.fill(tf.shape(logits), _NEG_INF))
  log_p = tf.nn.log_softmax(masked, axis=-1)
  # 0 · log p is 0 also where p is 0 (illegal moves): no NaN from -1e9.
  cross_entropy = -tf.reduce_sum(
      tf.where(search_policy > 0, search_policy * log_p,
               tf.zeros_like(log_p)), axis=-1)
  target_entropy = -tf.reduce_sum(
      tf.where(search_policy > 0,
               search_policy * tf.math.log(
                   tf.maximum(search_policy, 1e-30)),
               tf.zeros_like(search_policy)), axis=-1)
  value_error = tf.square(outcome - value)
  policy_loss = tf.reduce_mean(cross_entropy)
  value_loss = tf.reduce_mean(value_error)
  return base.LossOutput(
      loss=policy_loss + value_cost * value_loss,
      extra={'policy_loss': policy_loss, 'value_loss': value_loss,
             'policy_kl': tf.reduce_mean(cross_entropy - target_entropy)})
