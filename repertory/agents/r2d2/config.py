"""R2D2 hyperparameters (Kapturowski et al. 2019, "Recurrent Experience
Replay in Distributed Reinforcement Learning", table 2), scaled down to the
small control tasks this project trains on."""

import dataclasses
from typing import ClassVar, Tuple

from repertory.agents.prioritized_replay import config as replay_config

INITIAL_PRIORITIES = replay_config.INITIAL_PRIORITIES


@dataclasses.dataclass
class Config(replay_config.PrioritizedReplayConfig):
  """R2D2 settings: those of `PrioritizedReplayConfig` (the items are
  sequences; `initial_priority='actor'` computes each sequence's priority
  from the actor's own Q-values), with R2D2's defaults, and these.

  Attributes:
    lstm_size: width of the LSTM core.
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
    value_rescaling_eps: epsilon of h(x) = sign(x)(sqrt(|x|+1)-1) + eps x
      (Pohlen et al. 2018), > 0.
    use_value_rescaling: False trains on plain (untransformed) targets.
    priority_eta: eta of the sequence priority
      eta * max|delta| + (1 - eta) * mean|delta|.
    learner_steps_per_publish: learner steps between published versions.
  """
  NAME: ClassVar[str] = 'R2D2'
  _POSITIVE: ClassVar[Tuple[str, ...]] = (
      'lstm_size', 'trace_length', 'sequence_period',
      'learner_steps_per_publish')
  _UNIT: ClassVar[Tuple[str, ...]] = ('priority_eta',)
  _ABOVE_ZERO: ClassVar[Tuple[str, ...]] = ('value_rescaling_eps',)

  # R2D2's values of the shared settings.
  torso_sizes: Tuple[int, ...] = (64,)
  n_step: int = 5
  batch_size: int = 32
  learning_rate: float = 1e-3
  adam_epsilon: float = 1e-3
  target_update_period: int = 100
  priority_exponent: float = 0.9
  importance_sampling_exponent: float = 0.6
  replay_size: int = 20_000
  min_replay_size: int = 200
  samples_per_insert: float = 8.0
  max_in_flight_items: int = 8
  # Its own.
  lstm_size: int = 64
  burn_in: int = 4
  trace_length: int = 14
  sequence_period: int = 7
  use_burn_in: bool = True
  use_stored_state: bool = True
  value_rescaling_eps: float = 1e-3
  use_value_rescaling: bool = True
  priority_eta: float = 0.9
  learner_steps_per_publish: int = 1

  def __post_init__(self):
    super().__post_init__()
    if self.burn_in < 0:
      self._fail('burn_in', '>= 0')
    if self.sequence_period > self.trace_length:
      raise ValueError(
          f'R2D2 Config.sequence_period={self.sequence_period} exceeds '
          f'trace_length={self.trace_length}: some steps would never be '
          'trained on.')

  @property
  def effective_burn_in(self) -> int:
    """Burn-in steps actually written and unrolled."""
    return self.burn_in if self.use_burn_in else 0

  @property
  def sequence_length(self) -> int:
    """Steps per stored sequence: burn-in + trace + 1 bootstrap step."""
    return self.effective_burn_in + self.trace_length + 1
