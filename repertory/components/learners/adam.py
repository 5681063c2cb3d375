"""Sonnet's Adam, each dense update in one fused kernel.

    optimizer = learners.Adam(learning_rate, epsilon=1e-5)   # as snt's
    optimizer.apply(gradients, network.trainable_variables)

`snt.optimizers.Adam` builds some twenty small operations per variable
(casts, moments, bias corrections, the step); with the small networks of
most RL agents they are most of an update's graph, and the first call
traces and instantiates every one of them. This class keeps
Sonnet's state (`step`, `m`, `v`, created and named as Sonnet creates them,
so checkpoints of either restore into the other) and Sonnet's update
(Kingma & Ba 2015, Algorithm 1, epsilon added to the bias-corrected
sqrt(v)), but applies a dense update with TensorFlow's `ResourceApplyAdam`,
one operation per variable. That kernel adds epsilon to the uncorrected
sqrt(v) and folds the bias corrections into the step size:

    var -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m_t / (sqrt(v_t) + eps')

which is Sonnet's update when eps' = eps * sqrt(1 - b2^t). The two agree up
to float rounding. Sparse updates (`tf.IndexedSlices`) go through Sonnet's
own code.
"""

from typing import Dict, Optional, Sequence

import sonnet as snt
import tensorflow as tf


class Adam(snt.optimizers.Adam):
  """`snt.optimizers.Adam` whose dense updates are one kernel per variable.

  Same arguments, attributes and checkpoint as `snt.optimizers.Adam`.
  """

  def apply(self, updates: Sequence[Optional[tf.Tensor]],
            parameters: Sequence[tf.Variable]) -> None:
    """Applies one Adam step of `updates` to `parameters` (see the module
    docstring); None updates leave their parameter and moments alone."""
    updates, parameters = list(updates), list(parameters)
    if any(isinstance(u, tf.IndexedSlices) for u in updates):
      super().apply(updates, parameters)
      return
    if not parameters or len(updates) != len(parameters):
      raise ValueError(f'Adam.apply: {len(updates)} updates for '
                       f'{len(parameters)} parameters.')
    self._initialize(parameters)
    self.step.assign_add(1)
    scalars = {}  # dtype -> the step's scalars in that dtype
    for update, param, m, v in zip(updates, parameters, self.m, self.v):
      if update is None:
        continue
      if update.dtype != param.dtype:
        raise ValueError(f'Adam.apply: an update of {update.dtype} for '
                         f'{param.name} of {param.dtype}.')
      if update.dtype not in scalars:
        scalars[update.dtype] = self._scalars(update.dtype)
      tf.raw_ops.ResourceApplyAdam(
          var=param.handle, m=m.handle, v=v.handle, grad=update,
          use_locking=False, **scalars[update.dtype])

  def _scalars(self, dtype: tf.DType) -> Dict[str, tf.Tensor]:
    """`ResourceApplyAdam`'s scalar inputs for this step."""
    cast = lambda x: tf.cast(x, dtype)
    t = cast(self.step)
    beta1, beta2 = cast(self.beta1), cast(self.beta2)
    beta2_power = tf.pow(beta2, t)
    return {'lr': cast(self.learning_rate), 'beta1': beta1, 'beta2': beta2,
            'beta1_power': tf.pow(beta1, t), 'beta2_power': beta2_power,
            'epsilon': cast(self.epsilon) * tf.sqrt(1. - beta2_power)}
