"""Hyperparameters of A3C."""

import dataclasses
from typing import Optional, Tuple

from repertory.components import config_checks

OPTIMIZERS = ('adam', 'rmsprop')
_PREFIX = 'A3C Config: '


@dataclasses.dataclass
class Config:
  """A3C (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement
  Learning", algorithm S3): actors compute n-step actor-critic gradients on
  their own rollouts; a parameter-server learner applies each one at once
  with a shared optimizer.

  Attributes:
    unroll_length: t_max, steps per rollout in each of an actor's
      environments; one gradient per rollout covers all of them.
    discount: gamma.
    entropy_cost: weight of the entropy bonus (the paper's beta).
    baseline_cost: weight of the value loss.
    hidden_sizes: widths of the MLP torso.
    optimizer: 'adam' or 'rmsprop' (the paper's shared RMSProp).
    learning_rate: step size of the shared optimizer.
    rmsprop_decay: RMSProp's decay (the paper's alpha).
    epsilon: the optimizer's epsilon.
    max_grad_norm: the actor clips its gradient to this global norm before
      sending it (None: no clipping).
    push_timeout_s: how long an actor waits for the learner to serve
      weights before failing.
    eval_greedy: the evaluation actor takes the most likely action.
  """
  # The rollout and the loss.
  unroll_length: int = 20
  discount: float = 0.99
  entropy_cost: float = 0.01
  baseline_cost: float = 0.5
  hidden_sizes: Tuple[int, ...] = (64, 64)
  # The shared optimizer.
  optimizer: str = 'adam'
  learning_rate: float = 1e-3
  rmsprop_decay: float = 0.99
  epsilon: float = 1e-5
  max_grad_norm: Optional[float] = 40.0
  push_timeout_s: float = 60.0
  eval_greedy: bool = True

  def __post_init__(self):
    config_checks.check_ranges(self, _PREFIX, at_least_one=('unroll_length',))
    if self.optimizer not in OPTIMIZERS:
      raise ValueError(f'A3C Config: optimizer={self.optimizer!r}; choose one '
                       f'of {OPTIMIZERS}.')
    config_checks.check_ranges(
        self, _PREFIX,
        above_zero=('learning_rate', 'epsilon', 'push_timeout_s'),
        above_zero_or_none=('max_grad_norm',),
        unit=('discount', 'rmsprop_decay'),
        at_least_zero=('entropy_cost', 'baseline_cost'))
    self.hidden_sizes = config_checks.widths(self, _PREFIX, 'hidden_sizes')

  def steps_per_gradient(self, envs_per_actor: int) -> int:
    """Environment steps behind one gradient (t_max x environments)."""
    return self.unroll_length * envs_per_actor
