"""Search at play time: OpenSpiel's MCTS guided by a policy-value network."""

from repertory.components.search.network_mcts import check_game
from repertory.components.search.network_mcts import network_bot
from repertory.components.search.network_mcts import NetworkEvaluator
