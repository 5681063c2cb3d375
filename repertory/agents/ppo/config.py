"""Hyperparameters of synchronous PPO."""

import dataclasses
from typing import Optional, Tuple

from repertory.components import config_checks

_PREFIX = 'PPO Config: '


@dataclasses.dataclass
class Config:
  """Synchronous PPO (Schulman et al. 2017, "Proximal Policy Optimization
  Algorithms"), one policy version per round.

  The defaults (close to the RL Baselines3 Zoo's tuned CartPole settings,
  for 2 actors x 8 environments) solve `gym:CartPole-v1` and `catch`.

  Every round the learner publishes version v, every actor collects exactly
  `unroll_length` steps in each of its environments with version v, and the
  learner trains `num_epochs` epochs on that data only before publishing v+1.

  Attributes:
    unroll_length: steps each environment of each actor takes per round (T).
    num_epochs: passes over one round's data.
    num_minibatches: minibatches per epoch; the round's T x B steps are
      shuffled and split into this many parts.
    learning_rate: Adam step size.
    anneal_learning_rate: decay the step size linearly to 0 over
      `anneal_steps` actor steps (CleanRL's PPO does).
    anneal_steps: actor steps over which the step size anneals (the run's
      budget is a good choice; 0 means "use the experiment's
      max_actor_steps").
    adam_epsilon: Adam's epsilon.
    discount: gamma.
    gae_lambda: lambda of generalised advantage estimation (Schulman et al.
      2016).
    clip_epsilon: the PPO ratio clip.
    value_clip_epsilon: clip of the value update around the behaviour value
      (None: no value clipping).
    value_cost: weight of the value loss.
    entropy_cost: weight of the entropy bonus.
    max_grad_norm: global gradient-norm clip (None: no clipping).
    normalize_advantages: normalise advantages per minibatch.
    hidden_sizes: widths of the MLP torso.
    round_timeout_s: how long the learner waits for all actors' data of one
      round before failing with the list of the missing actors (and how long
      an actor waits for the next version).
    eval_greedy: the evaluation actor takes the most likely action (the
      training actors always sample).
  """
  unroll_length: int = 32
  num_epochs: int = 20
  num_minibatches: int = 2
  learning_rate: float = 1e-3
  anneal_learning_rate: bool = False
  anneal_steps: int = 0
  adam_epsilon: float = 1e-5
  discount: float = 0.98
  gae_lambda: float = 0.8
  clip_epsilon: float = 0.2
  value_clip_epsilon: Optional[float] = 0.2
  value_cost: float = 0.5
  entropy_cost: float = 0.0
  max_grad_norm: Optional[float] = 0.5
  normalize_advantages: bool = True
  hidden_sizes: Tuple[int, ...] = (64, 64)
  round_timeout_s: float = 120.0
  eval_greedy: bool = True

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

  def items_per_round(self, num_actors: int, envs_per_actor: int) -> int:
    """Unrolls (one per environment) the learner trains on per round."""
    return num_actors * envs_per_actor

  def steps_per_round(self, num_actors: int, envs_per_actor: int) -> int:
    """Environment steps of one round (T x all environments)."""
    return self.unroll_length * self.items_per_round(num_actors,
                                                     envs_per_actor)

  def minibatch_size(self, num_actors: int, envs_per_actor: int) -> int:
    """Steps per minibatch (the last one of an epoch may be larger)."""
    return max(1, self.steps_per_round(num_actors, envs_per_actor) //
               self.num_minibatches)
