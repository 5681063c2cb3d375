"""Ape-X DQN (Horgan et al. 2018): distributed prioritized replay of n-step
transitions with a feed-forward double/dueling Q network."""

from repertory.components.actors.epsilon_greedy import apex_epsilon
from repertory.agents.apex.acting import ApexActor
from repertory.agents.apex.config import Config
from repertory.agents.apex.learning import ApexLearner
from repertory.agents.apex.program import make_program
from repertory.agents.apex.program import TABLE
