"""Hyperparameters of synchronous PPO."""

import dataclasses
from typing import Any, ClassVar, Dict, Optional, Tuple

from repertory.components import config_checks

_PREFIX = 'PPO Config: '
# The networks `Config.network` names (`components.networks.separate_mlp.KINDS`;
# written here too so that reading a config imports no TensorFlow).
NETWORKS = ('shared_relu', 'separate_tanh')


@dataclasses.dataclass
class Config:
  """Synchronous PPO (Schulman et al. 2017, "Proximal Policy Optimization
  Algorithms"), one policy version per round.

  The defaults are Stable-Baselines3's PPO with the RL Baselines3 Zoo's
  tuned CartPole-v1 settings (`hyperparams/ppo.yml`): SB3's `MlpPolicy`
  network, its value loss without clipping, and the learning rate and clip
  range annealed linearly to 0 over the run's budget. They solve
  `gym:CartPole-v1` and `catch`. The round's shape comes from the
  experiment: `num_actors x envs_per_actor x unroll_length` steps (512 with
  the default 2 x 8 x 32, two minibatches of 256; rl-zoo's 8 x 32 = 256 in
  one minibatch is `--num_actors=2 --envs_per_actor=4
  --config.num_minibatches=1`).

  Every round the learner publishes version v, every actor collects exactly
  `unroll_length` steps in each of its environments with version v, and the
  learner trains `num_epochs` epochs on that data only before publishing v+1.

  Attributes:
    unroll_length: steps each environment of each actor takes per round (T).
    num_epochs: passes over one round's data.
    num_minibatches: minibatches per epoch; the round's T x B steps are
      shuffled and split into this many parts.
    learning_rate: Adam step size (at the start of the schedule).
    anneal_learning_rate: decay the step size linearly to 0 over
      `anneal_steps` actor steps (SB3's `lin_1e-3`, CleanRL's `anneal_lr`).
      The value used to train on round k (counted from 0) is
      `learning_rate * (1 - (k + 1) * steps_per_round / anneal_steps)`, at
      least 0: the round's own steps count as done, as SB3 computes its
      progress after collecting a rollout.
    anneal_clip_epsilon: decay `clip_epsilon` the same way (SB3's
      `clip_range: lin_0.2`).
    anneal_steps: actor steps over which the schedules reach 0 (0 means "use
      the experiment's max_actor_steps", the run's budget).
    adam_epsilon: Adam's epsilon.
    discount: gamma.
    gae_lambda: lambda of generalised advantage estimation (Schulman et al.
      2016).
    clip_epsilon: the PPO ratio clip (at the start of its schedule).
    value_clip_epsilon: clip of the value update around the behaviour value
      (None: no value clipping, SB3's default).
    value_cost: weight of the value loss, ½ mean squared error (1.0 is SB3's
      `vf_coef=0.5`, which weighs the plain mean squared error).
    entropy_cost: weight of the entropy bonus.
    max_grad_norm: global gradient-norm clip (None: no clipping).
    normalize_advantages: normalise advantages per minibatch.
    hidden_sizes: widths of the MLP layers (of each MLP for
      'separate_tanh').
    network: 'separate_tanh' (SB3's `MlpPolicy`: separate policy and value
      MLPs with tanh, orthogonal weights with gain √2 in hidden layers, 0.01
      for the logits, 1 for the value, zero biases; see
      `components/networks/separate_mlp.py`) or 'shared_relu' (one ReLU
      torso for policy and value with Sonnet's default initialisation;
      repertory's PPO network before).
    round_timeout_s: how long the learner waits for all actors' data of one
      round before failing with the list of the missing actors (and how long
      an actor waits for the next version).
    eval_greedy: the evaluation actor takes the most likely action (the
      training actors always sample).
    batched_items: each actor writes its round, the unrolls of its N =
      `envs_per_actor` environments, as ONE Reverb item of [N, T + 1, ...]
      columns (the default); False writes N items, which costs the actor,
      the queue and the learner's reader N times their per-item work.
  """
  unroll_length: int = 32
  num_epochs: int = 20
  num_minibatches: int = 2
  learning_rate: float = 1e-3
  anneal_learning_rate: bool = True
  anneal_clip_epsilon: bool = True
  anneal_steps: int = 0
  adam_epsilon: float = 1e-5
  discount: float = 0.98
  gae_lambda: float = 0.8
  clip_epsilon: float = 0.2
  value_clip_epsilon: Optional[float] = None
  value_cost: float = 1.0
  entropy_cost: float = 0.0
  max_grad_norm: Optional[float] = 0.5
  normalize_advantages: bool = True
  hidden_sizes: Tuple[int, ...] = (64, 64)
  network: str = 'separate_tanh'
  round_timeout_s: float = 120.0
  eval_greedy: bool = True
  batched_items: bool = True

  # Fields whose default is not what runs did before the field existed: a
  # run saved without one resumes only with this value (`rundir.check_resume`).
  FORMER_DEFAULTS: ClassVar[Dict[str, Any]] = {'batched_items': False}

  def __post_init__(self):
    config_checks.check_ranges(
        self, _PREFIX,
        at_least_one=('unroll_length', 'num_epochs', 'num_minibatches'),
        above_zero=('learning_rate', 'adam_epsilon', 'clip_epsilon',
                    'round_timeout_s'),
        above_zero_or_none=('value_clip_epsilon', 'max_grad_norm'),
        unit=('discount', 'gae_lambda'),
        at_least_zero=('value_cost', 'entropy_cost', 'anneal_steps'))
    self.hidden_sizes = config_checks.widths(self, _PREFIX, 'hidden_sizes')
    if self.network not in NETWORKS:
      config_checks.fail(self, _PREFIX, 'network',
                         'one of ' + ', '.join(NETWORKS))

  def items_per_round(self, num_actors: int, envs_per_actor: int) -> int:
    """Unrolls (one per environment) the learner trains on per round."""
    return num_actors * envs_per_actor

  def queue_items_per_round(self, num_actors: int,
                            envs_per_actor: int) -> int:
    """Reverb items of one round: one per actor with `batched_items`, else
    one per environment."""
    return num_actors * (1 if self.batched_items else envs_per_actor)

  def steps_per_round(self, num_actors: int, envs_per_actor: int) -> int:
    """Environment steps of one round (T x all environments)."""
    return self.unroll_length * self.items_per_round(num_actors,
                                                     envs_per_actor)

  def minibatch_size(self, num_actors: int, envs_per_actor: int) -> int:
    """Steps per minibatch (the last one of an epoch may be larger)."""
    return max(1, self.steps_per_round(num_actors, envs_per_actor) //
               self.num_minibatches)


def rounds_for_budget(max_actor_steps: int, steps_per_round: int) -> int:
  """Rounds of a run whose budget is `max_actor_steps`: a round starts
  while fewer steps than the budget were taken (SB3's `learn` loop), so the
  last round may end past it, by less than one round."""
  return -(-int(max_actor_steps) // int(steps_per_round))
