"""Sonnet 2 networks: torsos, LSTM core, heads, policy-value and Q networks.

Every network works on a single step (`[B, ...]`, acting) and on an unroll
(`[T, B, ...]`, learning) with the same weights; `variables.get_variables` /
`assign_variables` move its weights as `{name: np.ndarray}` dicts.
"""

from repertory.components.networks.heads import DuelingQHead
from repertory.components.networks.heads import GaussianPolicyValueHead
from repertory.components.networks.heads import GaussianPolicyValueOutput
from repertory.components.networks.heads import PolicyValueHead
from repertory.components.networks.heads import PolicyValueOutput
from repertory.components.networks.heads import QHead
from repertory.components.networks.policy_value import mlp_policy_value_network
from repertory.components.networks.graph_function import GraphFunction
from repertory.components.networks.policy_value import PolicyValueNetwork
from repertory.components.networks.policy_value import RecurrentPolicyValueNetwork
from repertory.components.networks.q_networks import QNetwork
from repertory.components.networks.q_networks import R2D2Input
from repertory.components.networks.q_networks import R2D2Network
from repertory.components.networks.recurrence import burn_in_unroll
from repertory.components.networks.recurrence import LSTMCore
from repertory.components.networks.recurrence import unroll_step_fn
from repertory.components.networks.seeding import seeded
from repertory.components.networks.torsos import AtariTorso
from repertory.components.networks.torsos import BoardTorso
from repertory.components.networks.torsos import check_board_planes
from repertory.components.networks.torsos import MinAtarTorso
from repertory.components.networks.torsos import MLPTorso
from repertory.components.networks.torsos import ResNetTorso
from repertory.components.networks.variables import assign_variables
from repertory.components.networks.variables import get_variables
from repertory.components.networks.variables import named_variables
from repertory.components.networks.variables import VariableReader
