"""AlphaZero's hyperparameters. Imports neither TensorFlow nor Reverb."""

import dataclasses
from typing import Optional, Tuple

from repertory.components import config_checks


@dataclasses.dataclass
class Config:
  """Search self-play and a replay of positions.

  Attributes:
    simulations: PUCT simulations per move in self-play.
    uct_c: c of the PUCT rule Q + c · P · sqrt(N) / (1 + N(a)).
    dirichlet_alpha: α of the Dirichlet noise mixed into the root's priors
      (AlphaZero: 0.3 for chess, 0.03 for Go; about 10 / the number of
      legal moves).
    dirichlet_epsilon: the noise's weight ε (0: no noise).
    temperature_moves: a game's first this many moves are drawn in
      proportion to the root's visit counts, later ones are the most
      visited (or proven) move.
    conv_channels: 3x3 convolutions over `[C, H, W]` board planes
      (`networks.BoardTorso`); () for an MLP over the flat observation.
    hidden_sizes: the MLP after them.
    batch_size: positions per learner step.
    learning_rate: Adam's learning rate.
    weight_decay: c of the L2 term c ||θ||² over the weight matrices.
    value_cost: the weight of the value's squared error.
    max_gradient_norm: gradients are clipped to this global norm.
    replay_size: positions the replay holds (the oldest leave first).
    min_replay_size: positions before the learner starts.
    samples_per_insert: how often each position is sampled on average
      (Reverb's `SampleToInsertRatio` holds the learner and the actors to
      it); None: the learner samples as fast as it can.
    variable_update_period: actors fetch the learner's weights before every
      this many games.
  """
  simulations: int = 100
  uct_c: float = 2.0
  dirichlet_alpha: float = 1.0
  dirichlet_epsilon: float = 0.25
  temperature_moves: int = 10
  conv_channels: Tuple[int, ...] = (32, 32)
  hidden_sizes: Tuple[int, ...] = (128,)
  batch_size: int = 256
  learning_rate: float = 1e-3
  weight_decay: float = 1e-4
  value_cost: float = 1.0
  max_gradient_norm: float = 10.0
  replay_size: int = 50_000
  min_replay_size: int = 1_000
  samples_per_insert: Optional[float] = 4.0
  variable_update_period: int = 1

  def __post_init__(self):
    prefix = 'AlphaZero Config.'
    config_checks.check_ranges(
        self, prefix,
        at_least_one=('simulations', 'batch_size', 'replay_size',
                      'min_replay_size', 'variable_update_period'),
        above_zero=('uct_c', 'dirichlet_alpha', 'learning_rate',
                    'max_gradient_norm'),
        above_zero_or_none=('samples_per_insert',),
        unit=('dirichlet_epsilon',),
        at_least_zero=('temperature_moves', 'weight_decay', 'value_cost'))
    if not self.batch_size <= self.min_replay_size <= self.replay_size:
      raise ValueError(
          f'AlphaZero Config: need batch_size ({self.batch_size}) <= '
          f'min_replay_size ({self.min_replay_size}) <= replay_size '
          f'({self.replay_size}).')
    self.conv_channels = tuple(int(c) for c in self.conv_channels)
    if any(c < 1 for c in self.conv_channels):
      config_checks.fail(self, prefix, 'conv_channels',
                         'positive widths, or () for an MLP')
    self.hidden_sizes = config_checks.widths(self, prefix, 'hidden_sizes')


TABLE = 'positions'  # The Reverb replay of positions.
POLICY = 'policy'    # The learner's variable group.
