"""Pure loss functions: V-trace/IMPALA, GAE + PPO, n-step double Q, A3C."""

from repertory.components.losses.base import categorical_entropy
from repertory.components.losses.base import categorical_log_prob
from repertory.components.losses.base import LossOutput
from repertory.components.losses.vtrace import impala_loss
from repertory.components.losses.vtrace import impala_loss_from_log_probs
from repertory.components.losses.vtrace import vtrace
from repertory.components.losses.vtrace import VTraceReturns
