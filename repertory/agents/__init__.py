"""The built-in agents, one folder each.

Every agent package exports `Config` (a validated dataclass of its
hyperparameters) and `make_program(config, experiment) -> launch.Program`.
"""

import importlib
from types import ModuleType

# Name -> module; imported only when asked for, so that `--agent=seed` never
# pays for the others' imports.
AGENTS = {
    'impala': 'repertory.agents.impala',
    'seed': 'repertory.agents.seed',
    'r2d2': 'repertory.agents.r2d2',
    'apex': 'repertory.agents.apex',
    'ppo': 'repertory.agents.ppo',
    'a3c': 'repertory.agents.a3c',
    'neurd': 'repertory.agents.neurd',
    'alphazero': 'repertory.agents.alphazero',
}
# Agents of earlier versions: name -> what replaced it.
RENAMED = {
    'selfplay': 'use --agent=neurd --league=<rule> (NeuRD, MMD, A2C; '
                'docs/selfplay.md), or any agent with --league=<rule>',
}


def register(name: str, module: str) -> None:
  """Makes the agent package (or script module) `module` known as `name`.

  The module must export `Config` and `make_program(config, experiment)`;
  `python -m repertory.run --agent=<name>` and `get(name)` then find it.
  """
  if name in AGENTS and AGENTS[name] != module:
    raise ValueError(f'Agent {name!r} is already registered as '
                     f'{AGENTS[name]!r}.')
  AGENTS[name] = module


def get(name: str) -> ModuleType:
  """Returns the agent package `name`, or raises naming the known agents."""
  if name in RENAMED and name not in AGENTS:
    raise ValueError(f'Agent {name!r} was replaced: {RENAMED[name]}.')
  if name not in AGENTS:
    raise ValueError(
        f'Unknown agent {name!r}; known agents: {", ".join(sorted(AGENTS))}.')
  try:
    return importlib.import_module(AGENTS[name])
  except ModuleNotFoundError as e:
    if e.name == AGENTS[name]:
      raise ValueError(f'Agent {name!r} is not available in this version of '
                       'repertory.') from e
    raise
