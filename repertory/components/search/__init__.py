"""OpenSpiel's MCTS guided by a policy-value network (`network_bot`), at
play time or in an agent's search self-play."""

from repertory.components.search.network_mcts import check_game
from repertory.components.search.network_mcts import network_bot
from repertory.components.search.network_mcts import NetworkEvaluator
from repertory.components.search.network_mcts import visit_distribution
