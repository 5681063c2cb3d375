"""Pure loss functions (TensorFlow), time-major `[T, B, ...]`.

V-trace / IMPALA (`vtrace`), GAE + PPO (`ppo`), transformed n-step double Q
and R2D2 priorities (`n_step_q`, `value_rescaling`), A3C (`actor_critic`),
prioritized-replay importance weights (`importance_weights`); AlphaZero's
policy and value loss on positions `[B, ...]` (`alphazero`).
"""

from repertory.components.losses.actor_critic import actor_critic_loss
from repertory.components.losses.actor_critic import actor_critic_loss_from_log_probs
from repertory.components.losses.actor_critic import discounted_returns
from repertory.components.losses.alphazero import alphazero_loss
from repertory.components.losses.base import categorical_entropy
from repertory.components.losses.base import categorical_log_prob
from repertory.components.losses.base import gaussian_entropy
from repertory.components.losses.base import gaussian_log_prob
from repertory.components.losses.base import LossOutput
from repertory.components.losses.importance_weights import importance_sampling_weights
from repertory.components.losses.n_step_q import double_q_learning
from repertory.components.losses.n_step_q import n_step_bootstrapped_returns
from repertory.components.losses.n_step_q import r2d2_priority
from repertory.components.losses.n_step_q import TDOutput
from repertory.components.losses.n_step_q import transformed_n_step_double_q_learning
from repertory.components.losses.ppo import AdvantageEstimate
from repertory.components.losses.ppo import clipped_surrogate_objective
from repertory.components.losses.ppo import generalized_advantage_estimation
from repertory.components.losses.ppo import ppo_loss
from repertory.components.losses.value_rescaling import IDENTITY_TRANSFORM
from repertory.components.losses.value_rescaling import numpy_signed_hyperbolic_transform
from repertory.components.losses.value_rescaling import signed_hyperbolic
from repertory.components.losses.value_rescaling import SIGNED_HYPERBOLIC_TRANSFORM
from repertory.components.losses.value_rescaling import signed_hyperbolic_transform
from repertory.components.losses.value_rescaling import signed_parabolic
from repertory.components.losses.value_rescaling import ValueTransform
from repertory.components.losses.vtrace import appo_loss
from repertory.components.losses.vtrace import appo_loss_from_log_probs
from repertory.components.losses.vtrace import impala_loss
from repertory.components.losses.vtrace import impala_loss_from_log_probs
from repertory.components.losses.vtrace import normalized_advantages
from repertory.components.losses.vtrace import PG_ADVANTAGES
from repertory.components.losses.vtrace import vtrace
from repertory.components.losses.vtrace import VTraceReturns
