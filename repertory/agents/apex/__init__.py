"""Ape-X DQN (Horgan et al. 2018): distributed prioritized replay of n-step
transitions with a feed-forward double/dueling Q network."""

from repertory.agents.apex.config import Config

# Everything else is imported when first asked for (`apex.make_program`):
# the registry (`agents.get`) and the driver read `Config` without
# importing TensorFlow.
_LAZY = {
    'apex_epsilon': 'repertory.components.actors.epsilon_greedy',
    'ApexActor': 'repertory.agents.apex.acting',
    'ApexLearner': 'repertory.agents.apex.learning',
    'make_program': 'repertory.agents.apex.program',
    'TABLE': 'repertory.agents.apex.program',
}


def __getattr__(name: str):
  if name in _LAZY:
    import importlib  # pylint: disable=g-import-not-at-top
    return getattr(importlib.import_module(_LAZY[name]), name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
