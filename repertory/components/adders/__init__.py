"""Adders: write experience to Reverb through `TrajectoryWriter`.

- `NStepTransitionAdder`: n-step transitions (Ape-X, DQN).
- `SequenceAdder`: overlapping sequences with stored recurrent state (R2D2).
- `EpisodeAdder`: whole episodes.
- `UnrollAdder`: batched [T + 1] unrolls of N environments (IMPALA, SEED, PPO).
- `PositionAdder`: single positions, no time axis (AlphaZero's targets).
- `PerEnvironmentAdder`: a batched actor's steps fanned out to one adder per
  environment (any of the above that follow one episode at a time).

Each has a `signature(...)` (also a module function) that builds the table
signature from the environment spec, so tables reject malformed items.
"""

from repertory.components.adders.base import EnvironmentSpec
from repertory.components.adders.base import make_environment_spec
from repertory.components.adders.base import ReverbAdder
from repertory.components.adders.episode import episode_signature
from repertory.components.adders.episode import EpisodeAdder
from repertory.components.adders.fan_out import PerEnvironmentAdder
from repertory.components.adders.n_step import n_step_transition_signature
from repertory.components.adders.n_step import NStepTransitionAdder
from repertory.components.adders.positions import position_signature
from repertory.components.adders.positions import PositionAdder
from repertory.components.adders.sequence import EndBehavior
from repertory.components.adders.sequence import sequence_signature
from repertory.components.adders.sequence import SequenceAdder
from repertory.components.adders.unroll import UnrollAdder
from repertory.components.adders.unroll_layout import time_major_transitions
from repertory.components.adders.unroll_layout import unroll_signature
from repertory.components.adders.unroll_layout import UnrollTransitions
