"""The league: a pool of frozen policies on the model store, matchmaking
(latest, uniform, PFSP), a payoff table and Elo ratings, and a numpy policy
to play many frozen opponents at once.

See `league.py` for the usage loop.
"""

from repertory.components.league.eval_actor import against_random
from repertory.components.league.eval_actor import EvalActor
from repertory.components.league.league import check_architecture
from repertory.components.league.league import exploiter_name
from repertory.components.league.league import League
from repertory.components.league.league import learner_role
from repertory.components.league.league import LIVE_VERSION
from repertory.components.league.league import OPPONENT_ROLES
from repertory.components.league.league import ROLES
from repertory.components.league.league import snapshot_id
from repertory.components.league.matchmaking import pfsp_weights
from repertory.components.league.matchmaking import register as register_matchmaking
from repertory.components.league.matchmaking import RULES as MATCHMAKING_RULES
from repertory.components.league.policy import legal_probabilities
from repertory.components.league.policy import masked_logits
from repertory.components.league.policy import MLPPolicy
from repertory.components.league.policy import sample_legal
from repertory.components.league.ratings import Elo
from repertory.components.league.ratings import elo_expected
from repertory.components.league.ratings import PayoffTable
from repertory.components.league.ratings import performance_rating
from repertory.components.league.ratings import score_from_returns
from repertory.components.league.node import FrozenSource
from repertory.components.league.node import LeagueNode
from repertory.components.league.opponents import LeagueGame
from repertory.components.league.opponents import LeagueSeat
from repertory.components.league.program import against_random as against_random_seat
from repertory.components.league.program import make_program
from repertory.components.league.program import MIN_EVAL_GAMES
from repertory.components.league.program import RULES
from repertory.components.league.sampled_rating import SampledRating
from repertory.components.league.storage import check_directory
from repertory.components.league.storage import WeightStore
