"""Ape-X DQN hyperparameters (Horgan et al. 2018, "Distributed Prioritized
Experience Replay", appendix C), scaled down to small control tasks."""

import dataclasses
from typing import Tuple

INITIAL_PRIORITIES = ('actor', 'constant')


@dataclasses.dataclass
class Config:
  """Ape-X DQN settings.

  Attributes:
    torso_sizes: widths of the MLP torso over the (flattened) observation.
    head_sizes: hidden widths of each stream of the dueling head.
    n_step: steps of the n-step double Q target.
    discount: per-step discount gamma.
    batch_size: transitions per learner step.
    learning_rate: Adam step size.
    adam_epsilon: Adam epsilon.
    max_gradient_norm: gradients are clipped to this global norm.
    target_update_period: learner steps between copies of the online
      network into the target network.
    priority_exponent: alpha of the prioritized table.
    importance_sampling_exponent: beta of the importance weights
      (N * P(i)) ** -beta, normalised by their batch maximum.
    initial_priority: 'actor' (|delta| from the actor's own Q-values, Ape-X)
      or 'constant' (`constant_priority`).
    constant_priority: the insert priority when initial_priority='constant'.
    replay_size: table capacity in transitions (FIFO removal).
    min_replay_size: transitions in the table before the learner samples.
    samples_per_insert: the rate limiter's target ratio of sampled to
      inserted transitions.
    samples_per_insert_tolerance: the tolerance rate of the rate limiter's
      error buffer (`replay.tables.error_buffer_for`).
    epsilon: base exploration rate of the per-actor schedule.
    epsilon_alpha: alpha of the schedule eps_i = eps ** (1 + alpha i/(N-1)).
    eval_epsilon: exploration of the evaluation actor.
    variable_update_period: actor policy calls between weight fetches.
    max_in_flight_items: transitions an actor's writer may have pending.
  """
  torso_sizes: Tuple[int, ...] = (64, 64)
  head_sizes: Tuple[int, ...] = (64,)
  n_step: int = 3
  discount: float = 0.99
  batch_size: int = 64
  learning_rate: float = 5e-4
  adam_epsilon: float = 1e-6
  max_gradient_norm: float = 40.0
  target_update_period: int = 200
  priority_exponent: float = 0.6
  importance_sampling_exponent: float = 0.4
  initial_priority: str = 'actor'
  constant_priority: float = 1.0
  replay_size: int = 50_000
  min_replay_size: int = 500
  samples_per_insert: float = 4.0
  samples_per_insert_tolerance: float = 0.5
  epsilon: float = 0.4
  epsilon_alpha: float = 7.0
  eval_epsilon: float = 0.0
  variable_update_period: int = 20
  max_in_flight_items: int = 32

  def __post_init__(self):
    self.torso_sizes = tuple(int(s) for s in self.torso_sizes)
    self.head_sizes = tuple(int(s) for s in self.head_sizes)
    for name in ('n_step', 'batch_size', 'target_update_period',
                 'replay_size', 'min_replay_size', 'variable_update_period',
                 'max_in_flight_items'):
      if getattr(self, name) < 1:
        raise ValueError(f'Ape-X Config.{name} must be >= 1, got '
                         f'{getattr(self, name)}.')
    if not self.torso_sizes or min(self.torso_sizes) < 1:
      raise ValueError(f'Ape-X Config.torso_sizes must be positive widths, '
                       f'got {self.torso_sizes}.')
    if self.min_replay_size > self.replay_size:
      raise ValueError(f'Ape-X Config.min_replay_size={self.min_replay_size} '
                       f'exceeds replay_size={self.replay_size}.')
    for name in ('discount', 'epsilon', 'eval_epsilon', 'priority_exponent',
                 'importance_sampling_exponent'):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f'Ape-X Config.{name} must be in [0, 1], got '
                         f'{getattr(self, name)}.')
    for name in ('learning_rate', 'samples_per_insert', 'constant_priority',
                 'samples_per_insert_tolerance', 'max_gradient_norm',
                 'adam_epsilon'):
      if getattr(self, name) <= 0:
        raise ValueError(f'Ape-X Config.{name} must be > 0, got '
                         f'{getattr(self, name)}.')
    if self.epsilon_alpha < 0:
      raise ValueError(f'Ape-X Config.epsilon_alpha must be >= 0, got '
                       f'{self.epsilon_alpha}.')
    if self.initial_priority not in INITIAL_PRIORITIES:
      raise ValueError(
          f'Ape-X Config.initial_priority={self.initial_priority!r}; choose '
          f'one of {INITIAL_PRIORITIES}.')
