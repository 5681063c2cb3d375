"""R2D2 hyperparameters (Kapturowski et al. 2019, "Recurrent Experience
Replay in Distributed Reinforcement Learning", table 2), scaled down to the
small control tasks this project trains on."""

import dataclasses
from typing import Tuple

INITIAL_PRIORITIES = ('actor', 'constant')


@dataclasses.dataclass
class Config:
  """R2D2 settings.

  Attributes:
    torso_sizes: widths of the MLP torso over the (flattened) observation.
    lstm_size: width of the LSTM core.
    head_sizes: hidden widths of each stream of the dueling head.
    burn_in: steps at the start of every replayed sequence that only rebuild
      the LSTM state (no gradient, outputs dropped).
    trace_length: steps of every sequence that are trained on.
    sequence_period: a new sequence starts every this many steps (so
      consecutive sequences overlap by `sequence_length - sequence_period`).
    use_burn_in: False drops the burn-in from the sequences altogether (the
      learner starts training at the sequence's first step), to measure its
      effect.
    use_stored_state: False makes the learner start every sequence from the
      zero state instead of the LSTM state the actor had (still stored).
    n_step: steps of the n-step double Q target.
    discount: per-step discount gamma.
    value_rescaling_eps: epsilon of h(x) = sign(x)(sqrt(|x|+1)-1) + eps x
      (Pohlen et al. 2018), > 0.
    use_value_rescaling: False trains on plain (untransformed) targets.
    batch_size: sequences per learner step.
    learning_rate: Adam step size.
    adam_epsilon: Adam epsilon.
    max_gradient_norm: gradients are clipped to this global norm.
    target_update_period: learner steps between copies of the online
      network into the target network.
    priority_exponent: alpha of the prioritized table (sampling
      probability proportional to priority ** alpha).
    importance_sampling_exponent: beta of the importance weights
      (N * P(i)) ** -beta, normalised by their batch maximum.
    priority_eta: eta of the sequence priority
      eta * max|delta| + (1 - eta) * mean|delta|.
    initial_priority: 'actor' (actors compute each sequence's priority from
      their own Q-values) or 'constant' (`constant_priority`).
    constant_priority: the insert priority when initial_priority='constant'.
    replay_size: table capacity in sequences (FIFO removal).
    min_replay_size: sequences in the table before the learner samples.
    samples_per_insert: the rate limiter's target ratio of sampled
      sequences to inserted sequences.
    samples_per_insert_tolerance: the tolerance rate of the rate limiter's
      error buffer (`replay.tables.error_buffer_for`: about
      rate * samples_per_insert * min_replay_size samples): how far sampling
      may run ahead of or behind the target ratio.
    epsilon: base exploration rate of the per-actor schedule.
    epsilon_alpha: alpha of the Ape-X schedule
      eps_i = epsilon ** (1 + alpha * i / (N - 1)).
    eval_epsilon: exploration of the evaluation actor.
    variable_update_period: actor policy calls between weight fetches.
    max_in_flight_items: sequences an actor's writer may have pending.
    learner_steps_per_publish: learner steps between published versions.
  """
  torso_sizes: Tuple[int, ...] = (64,)
  lstm_size: int = 64
  head_sizes: Tuple[int, ...] = (64,)
  burn_in: int = 4
  trace_length: int = 14
  sequence_period: int = 7
  use_burn_in: bool = True
  use_stored_state: bool = True
  n_step: int = 5
  discount: float = 0.99
  value_rescaling_eps: float = 1e-3
  use_value_rescaling: bool = True
  batch_size: int = 32
  learning_rate: float = 1e-3
  adam_epsilon: float = 1e-3
  max_gradient_norm: float = 40.0
  target_update_period: int = 100
  priority_exponent: float = 0.9
  importance_sampling_exponent: float = 0.6
  priority_eta: float = 0.9
  initial_priority: str = 'actor'
  constant_priority: float = 1.0
  replay_size: int = 20_000
  min_replay_size: int = 200
  samples_per_insert: float = 8.0
  samples_per_insert_tolerance: float = 0.5
  epsilon: float = 0.4
  epsilon_alpha: float = 7.0
  eval_epsilon: float = 0.0
  variable_update_period: int = 20
  max_in_flight_items: int = 8
  learner_steps_per_publish: int = 1

  def __post_init__(self):
    self.torso_sizes = tuple(int(s) for s in self.torso_sizes)
    self.head_sizes = tuple(int(s) for s in self.head_sizes)
    positive = ('lstm_size', 'trace_length', 'sequence_period', 'n_step',
                'batch_size', 'target_update_period', 'replay_size',
                'min_replay_size', 'variable_update_period',
                'max_in_flight_items', 'learner_steps_per_publish')
    for name in positive:
      if getattr(self, name) < 1:
        raise ValueError(f'R2D2 Config.{name} must be >= 1, got '
                         f'{getattr(self, name)}.')
    if not self.torso_sizes or min(self.torso_sizes) < 1:
      raise ValueError(f'R2D2 Config.torso_sizes must be positive widths, '
                       f'got {self.torso_sizes}.')
    if self.burn_in < 0:
      raise ValueError(f'R2D2 Config.burn_in must be >= 0, got '
                       f'{self.burn_in}.')
    if self.sequence_period > self.trace_length:
      raise ValueError(
          f'R2D2 Config.sequence_period={self.sequence_period} exceeds '
          f'trace_length={self.trace_length}: some steps would never be '
          'trained on.')
    if self.min_replay_size > self.replay_size:
      raise ValueError(f'R2D2 Config.min_replay_size={self.min_replay_size} '
                       f'exceeds replay_size={self.replay_size}.')
    for name in ('discount', 'priority_eta', 'epsilon', 'eval_epsilon',
                 'importance_sampling_exponent', 'priority_exponent'):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f'R2D2 Config.{name} must be in [0, 1], got '
                         f'{getattr(self, name)}.')
    for name in ('learning_rate', 'samples_per_insert',
                 'samples_per_insert_tolerance', 'constant_priority',
                 'max_gradient_norm', 'adam_epsilon', 'value_rescaling_eps'):
      if getattr(self, name) <= 0:
        raise ValueError(f'R2D2 Config.{name} must be > 0, got '
                         f'{getattr(self, name)}.')
    if self.epsilon_alpha < 0:
      raise ValueError(f'R2D2 Config.epsilon_alpha must be >= 0, got '
                       f'{self.epsilon_alpha}.')
    if self.initial_priority not in INITIAL_PRIORITIES:
      raise ValueError(f'R2D2 Config.initial_priority={self.initial_priority!r}'
                       f'; choose one of {INITIAL_PRIORITIES}.')

  @property
  def effective_burn_in(self) -> int:
    """Burn-in steps actually written and unrolled."""
    return self.burn_in if self.use_burn_in else 0

  @property
  def sequence_length(self) -> int:
    """Steps per stored sequence: burn-in + trace + 1 bootstrap step."""
    return self.effective_burn_in + self.trace_length + 1
