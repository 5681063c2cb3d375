"""NeuRD's hyperparameters (and MMD's, A2C's: the same learner with another
policy loss). Imports neither TensorFlow nor Reverb."""

import dataclasses
from typing import Optional, Tuple

POLICY_LOSSES = ('neurd', 'mmd', 'a2c')


@dataclasses.dataclass
class Config:
  """A policy with an action-value critic, learned on one seat of a
  two-player game in a league (`--league=<rule>`).

  Attributes:
    policy_loss: which loss of `loss.py` the learner minimises: 'mmd'
      (magnetic mirror descent in NeuRD form: pulled towards a magnet, so
      the live policy converges instead of cycling), 'neurd' (Neural
      Replicator Dynamics: every legal action's logit follows its
      advantage under the Q critic) or 'a2c' (the sampled action's
      log-probability times its advantage).
    magnet_strength: 'mmd' only: α, the weight of the KL(π, ρ) pull towards
      the magnet ρ (with the uniform magnet: the temperature of the QRE it
      converges to).
    magnet_update_steps: 'mmd' only: None: the magnet ρ is the uniform
      policy over the legal actions, for good; N: ρ is a magnet network
      that starts as the initial network and becomes a copy of the live
      network every N learner steps (a moving magnet, as in MMD's
      moving-magnet variant and R-NaD: each phase converges to the
      equilibrium of the game regularised towards the previous phase's
      policy, so the sequence approaches a Nash equilibrium rather than a
      QRE). The magnet network is saved with the learner's checkpoints.
    neurd_clip: 'neurd' and 'mmd': no logit is pushed further than ±this
      from the mean logit of the legal actions (softmax ignores a common
      offset, so this bounds the policy's log-odds, as R-NaD's logit
      threshold does). Small, so that no action's probability saturates
      where an equilibrium mixes: a moving magnet copies a saturated
      policy, and each phase's fixed point π ∝ ρ exp(Q / α) then moves
      the log-odds by only about the actions' difference in Q over α, so
      recovering takes many phases.
    exploration: actors play a uniformly random legal action with this
      probability (so the critic learns every action's value).
    unroll_length: T, the seat's moves per queue item (items of T + 1
      steps; games end and start inside them).
    batch_size: unrolls per learner step.
    learning_rate: Adam's learning rate.
    learning_rate_decay_steps: None: constant; N: learner step k uses
      learning_rate / sqrt(1 + k / N) (the step sizes of mirror descent's
      last-iterate guarantees shrink so).
    discount: γ on top of the game's discount (1: episodic games).
    entropy_cost: weight of the entropy bonus.
    baseline_cost: weight of the critic's (Q) loss.
    max_gradient_norm: gradients are clipped to this global norm.
    hidden_sizes: widths of the MLP torso.
    activation: the torso's activation (a `tf.nn` name the numpy acting
      step knows: relu, tanh).
    variable_update_period: actors fetch the learner's weights every this
      many steps (non-blocking).
    weights_transport: how actors fetch weights ('tcp', or 'ray' between
      Ray processes), as IMPALA's.
    max_queue_size: unrolls the Reverb queue holds before actors block.
    batched_items: an actor writes one item per batch of unrolls (all its
      environments' at once).
    batched_env_kind: how an actor batches its environments ('auto').
    train: False: the learner serves its initial weights and never steps.
    learner_log_every: learner metrics every this many steps.
  """
  policy_loss: str = 'mmd'
  magnet_strength: float = 0.5
  magnet_update_steps: Optional[int] = 300
  neurd_clip: float = 3.0
  exploration: float = 0.1
  unroll_length: int = 8
  batch_size: int = 16
  learning_rate: float = 1e-3
  learning_rate_decay_steps: Optional[int] = 500
  discount: float = 1.0
  entropy_cost: float = 0.0
  baseline_cost: float = 0.5
  max_gradient_norm: float = 10.0
  hidden_sizes: Tuple[int, ...] = (64, 64)
  activation: str = 'relu'
  variable_update_period: int = 4
  weights_transport: str = 'tcp'
  max_queue_size: int = 64
  batched_items: bool = True
  batched_env_kind: str = 'auto'
  train: bool = True
  learner_log_every: int = 100

  # The queue and actors of the actor-critic family read these; this
  # agent's network is feedforward.
  use_lstm = False
  lstm_size = None

  def __post_init__(self):
    if self.policy_loss not in POLICY_LOSSES:
      raise ValueError(f'Config.policy_loss={self.policy_loss!r}; choose one '
                       f'of {", ".join(POLICY_LOSSES)}.')
    for name in ('unroll_length', 'batch_size', 'variable_update_period',
                 'learner_log_every'):
      if getattr(self, name) < 1:
        raise ValueError(f'Config.{name} must be >= 1, got '
                         f'{getattr(self, name)}.')
    if not 1 <= self.batch_size <= self.max_queue_size:
      raise ValueError(f'Config.batch_size={self.batch_size} must be in '
                       f'[1, max_queue_size={self.max_queue_size}].')
    if not 0.0 <= self.exploration < 1.0:
      raise ValueError(f'Config.exploration must be in [0, 1), got '
                       f'{self.exploration}.')
    for name in ('magnet_update_steps', 'learning_rate_decay_steps'):
      value = getattr(self, name)
      if value is not None and value < 1:
        raise ValueError(f'Config.{name} must be >= 1 or None, got {value}.')
    if self.magnet_strength < 0 or self.neurd_clip <= 0:
      raise ValueError(f'Config: magnet_strength={self.magnet_strength} must '
                       f'be >= 0 and neurd_clip={self.neurd_clip} > 0.')
    if self.activation not in ('relu', 'tanh'):
      raise ValueError(f'Config.activation={self.activation!r}; choose one '
                       'of relu, tanh.')
    self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
