"""Self-play hyperparameters. Imports neither TensorFlow nor Reverb."""

import dataclasses
from typing import List, Optional, Tuple

MATCHMAKING = ('latest', 'uniform', 'pfsp', 'pfsp_variance', 'alphastar')
POLICY_LOSSES = ('neurd', 'a2c', 'mmd', 'vtrace', 'ppo')
# Where actors' policies run: in the actor (IMPALA) or on an inference
# server that also plays the opponents' snapshots (SEED).
INFERENCE = ('local', 'server')
# What an exploiter restarts from when its generation ends.
EXPLOITER_RESETS = ('initial', 'main')


@dataclasses.dataclass
class Config:
  """Self-play against a league of frozen snapshots (NeuRD, A2C, MMD,
  V-trace or PPO learner).

  Attributes:
    matchmaking: how actors pick each episode's opponent: 'latest' (naive
      self-play: the live policy plays every seat and every seat learns),
      'uniform' (fictitious self-play over the pool), 'pfsp' (AlphaStar's
      prioritized fictitious self-play, weight (1 - win rate)^2),
      'pfsp_variance' (weight p (1 - p)), 'alphastar' (AlphaStar's main
      agent: 50 % PFSP over the pool, 15 % against exploiters it loses to
      or its own forgotten snapshots, the rest live self-play;
      `league.matchmaking.alphastar_main`).
    policy_loss: 'neurd' (Neural Replicator Dynamics: every legal action's
      logit follows its advantage under the Q critic) or 'a2c' (the sampled
      action's log-probability times its advantage) or 'mmd' (magnetic
      mirror descent, Sokota et al. 2022, in NeuRD form: every legal
      action's logit follows Q(o, a) - magnet_strength · log(π(a|o) / ρ(a|o))
      minus its mean under π, which pulls π towards the magnet ρ and makes
      the live policy itself converge instead of cycling); see loss.py.
      'vtrace' (IMPALA's V-trace loss, off-policy corrected) or 'ppo'
      (PPO's clipped surrogate, `ppo_epochs` passes per batch); see
      updates.py. `--agent=impala|seed|ppo --selfplay=<rule>` sets these.
    magnet_strength: 'mmd' only: α, the weight of the KL(π, ρ) pull towards
      the magnet (with a fixed uniform magnet the policy converges to a
      logit (quantal response) equilibrium of temperature α).
    magnet_update_steps: 'mmd' only: None: the magnet ρ is the uniform
      policy over the legal actions, for good; N: ρ starts as the initial
      network and becomes a copy of the live network every N learner steps
      (a moving magnet, as in R-NaD and MMD's moving-magnet variant: each
      phase converges to the equilibrium of a game regularised towards the
      previous phase's result, so the sequence approaches a Nash equilibrium
      rather than a QRE).
    inference: 'local' (each actor plays the learner and the opponents'
      snapshots itself, IMPALA-style) or 'server' (actors step games and
      write trajectories; a central inference server plays the learner and
      every opponent snapshot, SEED-style; `--agent=seed
      --selfplay=<rule>`).
    clip_rho_threshold: V-trace's ρ̄ and c̄ ('vtrace').
    ppo_epochs: passes over each round's batch ('ppo': synchronous rounds,
      as the PPO agent's: every actor writes `batch_size` trajectories with
      one policy version, the learner trains on exactly that round and
      publishes the next version, which starts the next round).
    ppo_minibatches: minibatches per pass ('ppo').
    ppo_clip: the ratio clip ε, also the value clip ('ppo').
    gae_lambda: λ of GAE ('ppo').
    neurd_clip: NeuRD pushes no logit beyond ±this.
    exploration: the learning seats play a uniformly random legal action
      with this probability (so the critic learns every action's value).
    batch_size: per-player trajectories per learner step ('ppo': per actor
      and round).
    round_timeout_s: 'ppo': how long the learner waits for a round, and an
      actor for the next version, before failing with what is missing.
    learning_rate: Adam's learning rate.
    learning_rate_decay_steps: None: a constant learning rate; N: learning
      rate / sqrt(1 + t / N) at learner step t (a no-regret learner's average
      converges only as its steps shrink).
    discount: γ on top of the game's discount (1: episodic games).
    entropy_cost: weight of the entropy bonus.
    baseline_cost: weight of the critic's (Q) loss.
    max_gradient_norm: gradients are clipped to this global norm.
    hidden_sizes: widths of the MLP torso.
    conv_channels: () (the default): the torso is an MLP over the flattened
      observation. Channels, e.g. 64,64: board games' `[C, H, W]` planes
      (Connect Four) go through 3x3 convolutions of these widths first, then
      the `hidden_sizes` MLP (`networks.BoardTorso`); not with `use_lstm`.
    use_lstm: an LSTM core after the torso (IMPALA's recurrent agent,
      `components.networks.RecurrentPolicyValueNetwork` with a policy and a
      state-value head): each player carries its core state across its
      own turns of a game, the learner unrolls it from the state stored at
      each item's first step, and league snapshots are rebuilt with it.
      'vtrace' with inference='local' only (`--agent=impala --selfplay`).
    lstm_size: the LSTM's hidden size (`use_lstm`).
    unroll_length: T, one player's moves per item: items of T + 1 steps
      every T steps of its trajectory (overlapping by one, zero padded at
      the end of a game; V-trace bootstraps from the last step's value);
      each item stores the core state at its first step. None: the whole
      game (`max_player_steps`). 'vtrace' only.
    max_player_steps: the most moves one player makes in a game (whole-game
      items hold this + 1 steps); None: the game's maximum length.
    variable_update_period: actors fetch the learner's weights every this
      many steps (non-blocking).
    snapshot_every_steps: the league freezes the learner every this many
      learner steps (None: by margin only).
    snapshot_win_rate: ...or once its mean score against the pool since the
      last snapshot reaches this (None: by schedule only).
    min_games: games before the margin rule applies.
    max_snapshots: pool size; the oldest leave beyond it (the first stays).
    elo_k: Elo's k.
    num_exploiters: main exploiters (AlphaStar) beside the main agent, each
      with its own learner, queue and actors: an exploiter plays only the
      main agent's newest snapshot; its snapshots join the pool (role
      'exploiter'), where the main agent's matchmaking meets them like any
      other. 0: none. Needs a matchmaking rule that samples the pool (not
      'latest').
    exploiter_actors: actors per exploiter (None: `--num_actors`).
    exploiter_win_rate: an exploiter's generation ends (snapshot, then
      reset) once its mean score against main since its last reset reaches
      this, after `min_games` games (AlphaStar: 0.7).
    exploiter_reset_steps: ...or after this many of its learner steps
      (None: by win rate only).
    exploiter_reset: what an exploiter restarts from: 'initial' (the
      initial weights, as AlphaStar restarts its exploiters from the common
      starting point, there the supervised agent) or 'main' (the main
      agent's newest snapshot).
    report_every_games: actors send finished games to the league in batches
      of this many (per-game results, one call).
    max_queue_size: trajectories the Reverb queue holds before actors block.
    checkpoint_every_steps: learner checkpoints (network, optimizer, step,
      version) into `<logdir>/checkpoints`; a rerun resumes from them, and
      the league from `<logdir>/league`.
    learner_log_every: learner metrics every this many steps.
  """
  matchmaking: str = 'latest'
  policy_loss: str = 'neurd'
  inference: str = 'local'
  clip_rho_threshold: float = 1.0
  ppo_epochs: int = 4
  ppo_minibatches: int = 4
  ppo_clip: float = 0.2
  gae_lambda: float = 0.95
  neurd_clip: float = 10.0
  exploration: float = 0.1
  batch_size: int = 64
  round_timeout_s: float = 300.0
  learning_rate: float = 1e-3
  learning_rate_decay_steps: Optional[int] = None
  magnet_strength: float = 0.1
  magnet_update_steps: Optional[int] = None
  discount: float = 1.0
  entropy_cost: float = 0.0
  baseline_cost: float = 0.5
  max_gradient_norm: float = 10.0
  hidden_sizes: Tuple[int, ...] = (64, 64)
  conv_channels: Tuple[int, ...] = ()
  use_lstm: bool = False
  lstm_size: int = 64
  unroll_length: Optional[int] = None
  max_player_steps: Optional[int] = None
  variable_update_period: int = 4
  snapshot_every_steps: Optional[int] = 200
  snapshot_win_rate: Optional[float] = None
  min_games: int = 200
  max_snapshots: int = 1000
  elo_k: float = 16.0
  num_exploiters: int = 0
  exploiter_actors: Optional[int] = None
  exploiter_win_rate: float = 0.7
  exploiter_reset_steps: Optional[int] = 1000
  exploiter_reset: str = 'initial'
  report_every_games: int = 64
  max_queue_size: int = 512
  checkpoint_every_steps: int = 500
  learner_log_every: int = 50

  def __post_init__(self):
    if self.matchmaking not in MATCHMAKING:
      raise ValueError(f'Config.matchmaking={self.matchmaking!r}; choose one '
                       f'of {", ".join(MATCHMAKING)}.')
    if self.policy_loss not in POLICY_LOSSES:
      raise ValueError(f'Config.policy_loss={self.policy_loss!r}; choose one '
                       f'of {", ".join(POLICY_LOSSES)}.')
    if self.inference not in INFERENCE:
      raise ValueError(f'Config.inference={self.inference!r}; choose one '
                       f'of {", ".join(INFERENCE)}.')
    if not (self.clip_rho_threshold > 0 and self.ppo_clip > 0 and
            0 <= self.gae_lambda <= 1):
      raise ValueError(
          f'Config: clip_rho_threshold={self.clip_rho_threshold} and '
          f'ppo_clip={self.ppo_clip} must be > 0, gae_lambda='
          f'{self.gae_lambda} in [0, 1].')
    for name in ('ppo_epochs', 'ppo_minibatches', 'lstm_size',
                 'batch_size', 'variable_update_period',
                 'report_every_games', 'checkpoint_every_steps',
                 'learner_log_every', 'min_games'):
      if getattr(self, name) < 1:
        raise ValueError(f'Config.{name} must be >= 1, got '
                         f'{getattr(self, name)}.')
    if not 1 <= self.batch_size <= self.max_queue_size:
      raise ValueError(f'Config.batch_size={self.batch_size} must be in '
                       f'[1, max_queue_size={self.max_queue_size}].')
    if not 0.0 <= self.exploration < 1.0:
      raise ValueError(f'Config.exploration must be in [0, 1), got '
                       f'{self.exploration}.')
    for name in ('learning_rate_decay_steps', 'magnet_update_steps',
                 'exploiter_actors', 'exploiter_reset_steps',
                 'unroll_length'):
      value = getattr(self, name)
      if value is not None and value < 1:
        raise ValueError(f'Config.{name} must be >= 1 or None, got {value}.')
    if self.magnet_strength < 0:
      raise ValueError(f'Config.magnet_strength must be >= 0, got '
                       f'{self.magnet_strength}.')
    if self.max_player_steps is not None and self.max_player_steps < 1:
      raise ValueError(f'Config.max_player_steps must be >= 1 or None, got '
                       f'{self.max_player_steps}.')
    if self.snapshot_every_steps is None and self.snapshot_win_rate is None:
      raise ValueError('Config: set snapshot_every_steps or '
                       'snapshot_win_rate (or both), or the pool never grows.')
    if self.policy_loss == 'ppo' and self.inference != 'local':
      raise ValueError(
          f"Config: policy_loss='ppo' runs synchronous rounds, in which each "
          f'actor holds the round\'s weights; inference={self.inference!r} '
          "lets a server pull its own. Use inference='local'.")
    if not self.round_timeout_s > 0:
      raise ValueError(f'Config.round_timeout_s must be > 0, got '
                       f'{self.round_timeout_s}.')
    if self.num_exploiters < 0:
      raise ValueError(f'Config.num_exploiters must be >= 0, got '
                       f'{self.num_exploiters}.')
    if not 0 < self.exploiter_win_rate <= 1:
      raise ValueError(f'Config.exploiter_win_rate must be in (0, 1], got '
                       f'{self.exploiter_win_rate}.')
    if self.exploiter_reset not in EXPLOITER_RESETS:
      raise ValueError(f'Config.exploiter_reset={self.exploiter_reset!r}; '
                       f'choose one of {", ".join(EXPLOITER_RESETS)}.')
    self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
    self.conv_channels = tuple(int(c) for c in self.conv_channels)
    if any(c < 1 for c in self.conv_channels):
      raise ValueError(f'Config.conv_channels must be positive, got '
                       f'{self.conv_channels}.')


TABLE = 'trajectories'  # The Reverb queue of per-player trajectories.
POLICY = 'policy'       # The learner's variable group.
MAIN = 'main'           # The main agent's learner name in the league.


def check_exploiters(config: Config) -> None:
  """Refuses exploiters that the main agent would never meet. (Checked when
  the program is built, not in `__post_init__`: `--config.<field>` flags
  are applied one at a time, and the default matchmaking is 'latest'.)"""
  if config.num_exploiters and config.matchmaking == 'latest':
    raise ValueError(
        "Config: matchmaking='latest' plays the main agent against itself "
        f'only, so its num_exploiters={config.num_exploiters} exploiters would '
        'never be met; choose one of uniform, pfsp, pfsp_variance, alphastar.')


def check_network(config: Config) -> None:
  """Refuses the recurrent and unroll options where they cannot apply
  (checked when the program is built, as `check_exploiters`)."""
  if config.use_lstm and config.conv_channels:
    raise ValueError(
        f'Config.conv_channels={config.conv_channels} and use_lstm=True: the '
        'LSTM network has an MLP torso; choose one.')
  for name, given in (('use_lstm', config.use_lstm),
                      ('unroll_length', config.unroll_length is not None)):
    if given and (config.policy_loss, config.inference) != ('vtrace',
                                                            'local'):
      raise ValueError(
          f'Config.{name}={getattr(config, name)!r} applies to '
          "policy_loss='vtrace' with inference='local' (--agent=impala "
          f'--selfplay=<rule>); got policy_loss={config.policy_loss!r}, '
          f'inference={config.inference!r}.')


def unroll_steps(config: Config, max_player_steps: int) -> int:
  """T, one player's moves per item (`unroll_length`, at most a game's)."""
  if config.unroll_length is None:
    return max_player_steps
  return min(config.unroll_length, max_player_steps)


def architecture(config: Config) -> dict:
  """What rebuilds the network of this config's snapshots (league.json
  records it; a league of another architecture is refused)."""
  if config.use_lstm:
    return {'network': 'lstm_policy_value',
            'hidden_sizes': list(config.hidden_sizes),
            'lstm_size': config.lstm_size}
  if config.conv_channels:
    return {'network': 'board_policy_q',
            'conv_channels': list(config.conv_channels),
            'hidden_sizes': list(config.hidden_sizes)}
  return {'network': 'mlp_policy_q', 'hidden_sizes': list(config.hidden_sizes)}


def table_name(learner: str) -> str:
  """The queue of `learner`'s trajectories: TABLE for the main agent,
  'trajectories_exploiter0' for exploiter 0."""
  return TABLE if learner == MAIN else f'{TABLE}_{learner}'


def exploiter_names(config: Config) -> List[str]:
  """The exploiters' learner names: 'exploiter0', 'exploiter1', ..."""
  from repertory.components import league  # pylint: disable=g-import-not-at-top
  return [league.exploiter_name(k) for k in range(config.num_exploiters)]
