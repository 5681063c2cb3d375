"""Hyperparameters of A3C."""

import dataclasses
from typing import Optional, Tuple

OPTIMIZERS = ('adam', 'rmsprop')


@dataclasses.dataclass
class Config:
  """A3C (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement
  Learning", algorithm S3): actors compute n-step actor-critic gradients on
  their own rollouts; a parameter-server learner applies each one at once
  with a shared optimizer.

  Attributes:
    unroll_length: t_max, steps per rollout in each of an actor's
      environments; one gradient per rollout covers all of them.
    learning_rate: step size of the shared optimizer.
    optimizer: 'adam' or 'rmsprop' (the paper's shared RMSProp).
    rmsprop_decay: RMSProp's decay (the paper's alpha).
    epsilon: the optimizer's epsilon.
    discount: gamma.
    entropy_cost: weight of the entropy bonus (the paper's beta).
    baseline_cost: weight of the value loss.
    max_grad_norm: the actor clips its gradient to this global norm before
      sending it (None: no clipping).
    hidden_sizes: widths of the MLP torso.
    push_timeout_s: how long an actor waits for the learner to serve
      weights before failing.
    eval_greedy: the evaluation actor takes the most likely action.
  """
  unroll_length: int = 20
  learning_rate: float = 1e-3
  optimizer: str = 'adam'
  rmsprop_decay: float = 0.99
  epsilon: float = 1e-5
  discount: float = 0.99
  entropy_cost: float = 0.01
  baseline_cost: float = 0.5
  max_grad_norm: Optional[float] = 40.0
  hidden_sizes: Tuple[int, ...] = (64, 64)
  push_timeout_s: float = 60.0
  eval_greedy: bool = True

  def __post_init__(self):
    for name in ('unroll_length',):
      if getattr(self, name) < 1:
        raise ValueError(f'A3C Config: {name} must be >= 1, got '
                         f'{getattr(self, name)!r}.')
    if self.optimizer not in OPTIMIZERS:
      raise ValueError(f'A3C Config: optimizer={self.optimizer!r}; choose one '
                       f'of {OPTIMIZERS}.')
    for name in ('learning_rate', 'epsilon', 'push_timeout_s'):
      if not getattr(self, name) > 0:
        raise ValueError(f'A3C Config: {name} must be > 0, got '
                         f'{getattr(self, name)!r}.')
    if self.max_grad_norm is not None and not self.max_grad_norm > 0:
      raise ValueError('A3C Config: max_grad_norm must be > 0 or None (off), '
                       f'got {self.max_grad_norm!r}.')
    for name in ('discount', 'rmsprop_decay'):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f'A3C Config: {name} must be in [0, 1], got '
                         f'{getattr(self, name)!r}.')
    for name in ('entropy_cost', 'baseline_cost'):
      if getattr(self, name) < 0:
        raise ValueError(f'A3C Config: {name} must be >= 0, got '
                         f'{getattr(self, name)!r}.')
    if not self.hidden_sizes or any(int(h) < 1 for h in self.hidden_sizes):
      raise ValueError('A3C Config: hidden_sizes must be positive widths, got '
                       f'{self.hidden_sizes!r}.')
    self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)

  def steps_per_gradient(self, envs_per_actor: int) -> int:
    """Environment steps behind one gradient (t_max x environments)."""
    return self.unroll_length * envs_per_actor
