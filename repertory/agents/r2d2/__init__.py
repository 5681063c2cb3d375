"""R2D2 (Kapturowski et al. 2019): recurrent replay distributed DQN with
stored LSTM states, burn-in and value rescaling."""

from repertory.agents.r2d2.acting import R2D2Actor
from repertory.agents.r2d2.acting import R2D2Priority
from repertory.agents.r2d2.config import Config
from repertory.agents.r2d2.learning import R2D2Learner
from repertory.agents.r2d2.program import make_program
from repertory.agents.r2d2.program import TABLE
