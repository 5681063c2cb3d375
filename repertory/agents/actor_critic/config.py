"""Hyperparameters of the V-trace actor-critic (Espeholt et al. 2018,
arXiv:1802.01561) that IMPALA and SEED share.

This module imports neither TensorFlow nor Reverb, so that processes which
only need the settings (e.g. SEED's environment-only actors) stay light.
"""

import dataclasses
from typing import Any, ClassVar, Dict, Optional, Tuple

from repertory import launch
from repertory.components import specs

BATCHED_ENV_KINDS = ('auto', 'serial', 'process', 'envpool')
ACTIVATIONS = ('relu', 'tanh')
TORSOS = specs.TORSOS
# `losses.vtrace`'s pg_advantage choices (that module imports TensorFlow).
PG_ADVANTAGES = ('vtrace', 'gae')


@dataclasses.dataclass
class ActorCriticConfig:
  """The V-trace actor-critic's settings (IMPALA's); the defaults solve
  `catch`.

  Attributes:
    unroll_length: T, the number of transitions per unroll. An item holds
      T + 1 steps: consecutive unrolls of one environment overlap by one step
      (the last observation of one is the bootstrap of the other and the
      first of the next).
    batch_size: unrolls per learner step.
    learning_rate: Adam's learning rate (at the start of the schedule).
    learning_rate_anneal_steps: decay the learning rate linearly to 0 over
      this many actor steps, as SB3's rl-zoo `lin_` schedules and PPO's
      `anneal_learning_rate`; 0 keeps it constant. The learner counts the
      actor steps it has trained on, `batch_size * unroll_length` per
      applied update: update k (from 0) uses `learning_rate * max(0, 1 -
      (k + 1) * batch_size * unroll_length / learning_rate_anneal_steps)`.
      Set it near the run's `--max_actor_steps` (or below, to reach 0
      sooner).
    adam_epsilon: Adam's epsilon.
    discount: γ, applied on top of the environment's discount.
    reward_scale: the learner multiplies every reward by this before
      V-trace, so the value learns returns of that scale (CartPole's,
      up to 1 / (1 - γ) = 50 with γ = 0.98, become <= 1 with 0.02, as
      catch's); the policy gradient's advantages scale with it, the entropy
      bonus does not. Actors and evaluation see the environment's rewards.
    entropy_cost: weight of the entropy bonus.
    baseline_cost: weight of the value loss.
    max_gradient_norm: gradients are clipped to this global norm.
    normalize_advantages: the policy gradient's V-trace advantages
      ρ̄_s A_s are normalised per batch, over its real transitions, to mean 0
      and standard deviation 1 (PPO's normalisation; IMPALA's paper does not),
      so every batch moves the policy by a like amount: a rare failure's
      large advantages do not dominate, and a batch's common offset
      (returns rising faster than the value) adds no noise.
    ppo_clip: ε of APPO's clipped surrogate (RLlib's APPO): the policy
      loss becomes -mean(min(ρ Â, clip(ρ, 1-ε, 1+ε) Â)) with ρ = π/μ, the
      learner's over the behaviour policy's probability of the action, and
      Â the V-trace policy-gradient advantage, a trust region the V-trace
      loss lacks; None (the default) keeps IMPALA's policy gradient.
    anneal_ppo_clip: decay `ppo_clip` linearly to 0 with the learning rate
      (over `learning_rate_anneal_steps`, the same per-update fraction), as
      SB3's rl-zoo clip range and PPO's `anneal_clip_epsilon`; needs both.
    passes_per_batch: updates the learner makes on each batch (RLlib APPO's
      `num_epochs`): every pass recomputes V-trace with the current network
      (unless `targets_once_per_batch`) and applies one clipped Adam
      update; with `ppo_clip` the later passes are held within ε of the
      behaviour policy. 1 (the default) is IMPALA's one update per batch.
    targets_once_per_batch: with several passes, compute V-trace's value
      targets and advantages once per batch, with the network as it was
      before the batch's first pass, and keep them over its passes (PPO's
      returns and advantages, fixed over its epochs); the ratio ρ = π/μ of
      the clipped surrogate still follows the current policy. False (the
      default) recomputes them every pass with the current network, so the
      value chases targets it moves itself.
    vtrace_lambda: λ of V-trace (1.0: the paper's V-trace).
    pg_advantage: the policy-gradient advantage's form, one of
      PG_ADVANTAGES: 'vtrace' (the default), the paper's
      r_s + γ v_{s+1} - V(x_s), or 'gae', which bootstraps on
      (1 - λ) V(x_{s+1}) + λ v_{s+1} instead and so is GAE(λ) on-policy
      (PPO's and SB3's advantage). The two agree when `vtrace_lambda` is 1.
    clip_rho_threshold: ρ̄ of the V-trace value targets (None: no clipping).
    clip_pg_rho_threshold: the clip of ρ in the policy-gradient advantage
      (None: no clipping).
    torso: the network's torso, one of TORSOS: 'mlp', an MLP of
      `hidden_sizes` over the flattened observation; 'minatar', the MinAtar
      paper's network over `[H, W, C]` boards (conv 16 3x3 stride 1 +
      ReLU, linear 128 + ReLU; `hidden_sizes` and `activation` unused);
      'auto' (the default): 'minatar' for MinAtar's boards (boolean
      observations of rank 3), 'mlp' otherwise (`specs.resolve_torso`).
    hidden_sizes: widths of the MLP torso.
    activation: the MLP's nonlinearity, one of ACTIVATIONS.
    shared_torso: policy and value read one torso (IMPALA's network); False
      gives the value a torso of its own (feedforward only), which keeps the
      value loss of long-horizon tasks such as CartPole from disturbing the
      policy's features.
    use_lstm: add an LSTM core after the torso (IMPALA's recurrent agent).
    lstm_size: the LSTM's hidden size.
    variable_update_period: actors fetch new weights every this many batched
      steps (one policy call over all of an actor's environments).
    weights_transport: how IMPALA's actors fetch weights: 'tcp', a direct
      TCP connection to the learner's variable store, or 'handle', a call
      through the learner's handle (a Ray actor call in local_mp and ray,
      slower: see BENCHMARKS.md). SEED's servers share the learner's process
      by default and call it directly; placed apart
      (`inference_placement='separate'`) they fetch this way.
    max_queue_size: unrolls the Reverb queue holds before actors block.
    batched_items: each actor (or SEED inference server, per actor) writes
      an unroll of its N = `envs_per_actor` environments as ONE Reverb item
      of [N, T + 1, ...] columns, which the learner splits back into N
      unrolls (the default); False writes N items, which costs the actor
      about N times Reverb's per-item work (for small observations most of
      the writes' cost). The queue holds ceil(max_queue_size / N) items.
    max_policy_lag: the learner drops (and counts as `dropped_stale`) unrolls
      whose behaviour version is more than this many versions behind its own;
      None keeps every unroll.
    batched_env_kind: how an actor batches its environments: 'serial' (in
      the actor's process), 'process' (worker subprocesses), 'envpool', or
      'auto' ('envpool' for 'envpool:' specs, 'serial' otherwise).
    train: False disables learning (the learner serves its initial weights
      and never samples; the queue becomes a buffer that drops its oldest
      unrolls instead of blocking actors): to measure acting throughput.
    learner_log_every: the learner logs its metrics every this many steps
      (and at its first update).
  """
  unroll_length: int = 10
  batch_size: int = 8
  learning_rate: float = 3e-3
  learning_rate_anneal_steps: int = 0
  adam_epsilon: float = 1e-7
  discount: float = 0.99
  reward_scale: float = 1.0
  entropy_cost: float = 0.01
  baseline_cost: float = 0.5
  max_gradient_norm: float = 40.0
  normalize_advantages: bool = False
  ppo_clip: Optional[float] = None
  anneal_ppo_clip: bool = False
  passes_per_batch: int = 1
  targets_once_per_batch: bool = False
  vtrace_lambda: float = 1.0
  pg_advantage: str = 'vtrace'
  clip_rho_threshold: Optional[float] = 1.0
  clip_pg_rho_threshold: Optional[float] = 1.0
  torso: str = 'auto'
  hidden_sizes: Tuple[int, ...] = (64, 64)
  activation: str = 'relu'
  shared_torso: bool = True
  use_lstm: bool = False
  lstm_size: int = 64
  variable_update_period: int = 10
  weights_transport: str = 'tcp'
  max_queue_size: int = 64
  batched_items: bool = True
  max_policy_lag: Optional[int] = None
  batched_env_kind: str = 'auto'
  train: bool = True
  learner_log_every: int = 100

  # Fields whose default is not what runs did before the field existed: a
  # run saved without one resumes only with this value (`rundir.check_resume`).
  FORMER_DEFAULTS: ClassVar[Dict[str, Any]] = {'batched_items': False}

  def __post_init__(self):
    positive = ('unroll_length', 'batch_size', 'variable_update_period',
                'max_queue_size', 'lstm_size', 'learner_log_every',
                'passes_per_batch')
    for name in positive:
      value = getattr(self, name)
      if not isinstance(value, int) or value < 1:
        raise ValueError(f'Config.{name} must be a positive int, got '
                         f'{value!r}.')
    for name in ('learning_rate', 'adam_epsilon', 'max_gradient_norm',
                 'reward_scale'):
      if not getattr(self, name) > 0:
        raise ValueError(f'Config.{name} must be > 0, got '
                         f'{getattr(self, name)!r}.')
    if (not isinstance(self.learning_rate_anneal_steps, int)
        or self.learning_rate_anneal_steps < 0):
      raise ValueError('Config.learning_rate_anneal_steps must be an int >= 0 '
                       f'(0: no schedule), got '
                       f'{self.learning_rate_anneal_steps!r}.')
    for name in ('entropy_cost', 'baseline_cost'):
      if getattr(self, name) < 0:
        raise ValueError(f'Config.{name} must be >= 0, got '
                         f'{getattr(self, name)!r}.')
    for name in ('discount', 'vtrace_lambda'):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f'Config.{name} must be in [0, 1], got '
                         f'{getattr(self, name)!r}.')
    for name in ('clip_rho_threshold', 'clip_pg_rho_threshold', 'ppo_clip'):
      value = getattr(self, name)
      if value is not None and value <= 0:
        raise ValueError(f'Config.{name} must be > 0 or None, got {value!r}.')
    if self.anneal_ppo_clip and (self.ppo_clip is None
                                 or not self.learning_rate_anneal_steps):
      raise ValueError(
          'Config.anneal_ppo_clip=True needs ppo_clip and '
          'learning_rate_anneal_steps set, got ppo_clip='
          f'{self.ppo_clip!r}, learning_rate_anneal_steps='
          f'{self.learning_rate_anneal_steps!r}.')
    self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
    if not self.hidden_sizes or min(self.hidden_sizes) < 1:
      raise ValueError('Config.hidden_sizes must be a non-empty sequence of '
                       f'positive ints, got {self.hidden_sizes!r}.')
    if self.max_policy_lag is not None and self.max_policy_lag < 0:
      raise ValueError('Config.max_policy_lag must be >= 0 or None, got '
                       f'{self.max_policy_lag!r}.')
    if self.weights_transport not in launch.TRANSPORTS:
      raise ValueError(
          f'Config.weights_transport={self.weights_transport!r}; choose one '
          f'of {launch.TRANSPORTS}.')
    if self.pg_advantage not in PG_ADVANTAGES:
      raise ValueError(f'Config.pg_advantage={self.pg_advantage!r}; choose '
                       f'one of {PG_ADVANTAGES}.')
    if self.batched_env_kind not in BATCHED_ENV_KINDS:
      raise ValueError(f'Config.batched_env_kind={self.batched_env_kind!r}; '
                       f'choose one of {BATCHED_ENV_KINDS}.')
    if self.torso not in TORSOS:
      raise ValueError(f'Config.torso={self.torso!r}; choose one of '
                       f'{TORSOS}.')
    if self.activation not in ACTIVATIONS:
      raise ValueError(f'Config.activation={self.activation!r}; choose one of '
                       f'{ACTIVATIONS}.')
    if self.use_lstm and not self.shared_torso:
      raise ValueError('Config.shared_torso=False is for feedforward networks; '
                       'with use_lstm=True the LSTM core is shared.')
    if self.batch_size > self.max_queue_size:
      raise ValueError(
          f'Config.batch_size={self.batch_size} exceeds max_queue_size='
          f'{self.max_queue_size}: the learner could never fill a batch.')

  @property
  def sequence_length(self) -> int:
    """Steps stored per unroll item: T transitions need T + 1 steps."""
    return self.unroll_length + 1


def batched_env_kind(config_kind: str, env_spec: Any) -> str:
  """Resolves 'auto' to the batched environment kind for `env_spec`."""
  if config_kind != 'auto':
    return config_kind
  is_envpool = isinstance(env_spec, str) and env_spec.startswith('envpool:')
  return 'envpool' if is_envpool else 'serial'
