"""R2D2 (Kapturowski et al. 2019): recurrent replay distributed DQN with
stored LSTM states, burn-in and value rescaling."""

from repertory import launch
from repertory.agents.r2d2.config import Config

# Everything else is imported when first asked for (`r2d2.make_program`):
# the registry (`agents.get`) and the driver read `Config` without
# importing TensorFlow.
__getattr__ = launch.lazy_attributes(__name__, {
    'R2D2Actor': 'repertory.agents.r2d2.acting',
    'R2D2Priority': 'repertory.agents.r2d2.acting',
    'R2D2Learner': 'repertory.agents.r2d2.learning',
    'make_program': 'repertory.agents.r2d2.program',
    'TABLE': 'repertory.agents.r2d2.program',
})
