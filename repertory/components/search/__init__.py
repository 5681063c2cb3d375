"""OpenSpiel's MCTS guided by a policy-value network: at play time
(`network_bot`) and in AlphaZero's self-play (`SearchSelfPlayActor`)."""

from repertory.components.search.network_mcts import check_game
from repertory.components.search.network_mcts import network_bot
from repertory.components.search.network_mcts import NetworkEvaluator
from repertory.components.search.network_mcts import visit_distribution
from repertory.components.search.selfplay_actor import SearchSelfPlayActor
