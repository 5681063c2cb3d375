"""Ape-X DQN (Horgan et al. 2018): distributed prioritized replay of n-step
transitions with a feed-forward double/dueling Q network."""

from repertory import launch
from repertory.agents.apex.config import Config

# Everything else is imported when first asked for (`apex.make_program`):
# the registry (`agents.get`) and the driver read `Config` without
# importing TensorFlow.
__getattr__ = launch.lazy_attributes(__name__, {
    'apex_epsilon': 'repertory.components.actors.epsilon_greedy',
    'ApexActor': 'repertory.agents.apex.acting',
    'ApexLearner': 'repertory.agents.apex.learning',
    'make_program': 'repertory.agents.apex.program',
    'TABLE': 'repertory.agents.apex.program',
})
