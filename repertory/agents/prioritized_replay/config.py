"""The settings every prioritized replay agent (Ape-X, R2D2) has: network
widths, the n-step double-Q learner, the prioritized table and its rate
limiter, the actors' epsilon schedule. An agent's `Config` subclasses
`PrioritizedReplayConfig`, changes the defaults it needs and adds its own
fields (with their checks in `_POSITIVE`, `_UNIT`, `_ABOVE_ZERO`)."""

import dataclasses
from typing import ClassVar, Tuple

from repertory.components import config_checks

INITIAL_PRIORITIES = ('actor', 'constant')


@dataclasses.dataclass
class PrioritizedReplayConfig:
  """Settings of a prioritized replay agent (defaults: Ape-X's).

  Attributes:
    torso_sizes: widths of the MLP torso over the (flattened) observation.
    head_sizes: hidden widths of each stream of the dueling head.
    n_step: steps of the n-step double Q target.
    discount: per-step discount gamma.
    batch_size: items (transitions, sequences) per learner step.
    learning_rate: Adam step size.
    adam_epsilon: Adam epsilon.
    max_gradient_norm: gradients are clipped to this global norm.
    target_update_period: learner steps between copies of the online
      network into the target network.
    priority_exponent: alpha of the prioritized table (sampling
      probability proportional to priority ** alpha).
    importance_sampling_exponent: beta of the importance weights
      (N * P(i)) ** -beta, normalised by their batch maximum.
    initial_priority: 'actor' (actors compute each item's priority from
      their own Q-values) or 'constant' (`constant_priority`).
    constant_priority: the insert priority when initial_priority='constant'.
    replay_size: table capacity in items (FIFO removal).
    min_replay_size: items in the table before the learner samples.
    samples_per_insert: the rate limiter's target ratio of sampled to
      inserted items.
    samples_per_insert_tolerance: the tolerance rate of the rate limiter's
      error buffer (`replay.tables.error_buffer_for`: about
      rate * samples_per_insert * min_replay_size samples): how far sampling
      may run ahead of or behind the target ratio.
    epsilon: base exploration rate of the per-actor schedule.
    epsilon_alpha: alpha of the Ape-X schedule
      eps_i = epsilon ** (1 + alpha * i / (N - 1)).
    eval_epsilon: exploration of the evaluation actor.
    variable_update_period: actor policy calls between weight fetches.
    max_in_flight_items: items an actor's writer may have pending.
  """
  NAME: ClassVar[str] = 'Prioritized replay'
  # The subclass's own fields checked with the shared ones: >= 1 (ints),
  # in [0, 1], > 0.
  _POSITIVE: ClassVar[Tuple[str, ...]] = ()
  _UNIT: ClassVar[Tuple[str, ...]] = ()
  _ABOVE_ZERO: ClassVar[Tuple[str, ...]] = ()

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

  def _fail(self, name: str, what: str) -> None:
    config_checks.fail(self, f'{self.NAME} Config.', name, what)

  def __post_init__(self):
    prefix = f'{self.NAME} Config.'
    self.head_sizes = tuple(int(s) for s in self.head_sizes)
    self.torso_sizes = config_checks.widths(self, prefix, 'torso_sizes')
    config_checks.check_ranges(
        self, prefix,
        at_least_one=('n_step', 'batch_size', 'target_update_period',
                      'replay_size', 'min_replay_size',
                      'variable_update_period', 'max_in_flight_items'
                     ) + self._POSITIVE,
        unit=('discount', 'epsilon', 'eval_epsilon', 'priority_exponent',
              'importance_sampling_exponent') + self._UNIT,
        above_zero=('learning_rate', 'samples_per_insert',
                    'constant_priority', 'samples_per_insert_tolerance',
                    'max_gradient_norm', 'adam_epsilon') + self._ABOVE_ZERO,
        at_least_zero=('epsilon_alpha',))
    if self.min_replay_size > self.replay_size:
      raise ValueError(f'{self.NAME} Config.min_replay_size='
                       f'{self.min_replay_size} exceeds replay_size='
                       f'{self.replay_size}.')
    if self.initial_priority not in INITIAL_PRIORITIES:
      raise ValueError(
          f'{self.NAME} Config.initial_priority={self.initial_priority!r}; '
          f'choose one of {INITIAL_PRIORITIES}.')
