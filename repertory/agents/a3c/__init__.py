"""A3C: asynchronous actor-critic with a parameter-server learner.

  python -m repertory.run --agent=a3c --env=catch --lp_launch_type=local_mp
"""

from repertory.agents.a3c.config import Config

# Everything else is imported when first asked for (`a3c.make_program`):
# the registry (`agents.get`) and the driver read `Config` without
# importing TensorFlow.
_LAZY = {
    'make_program': 'repertory.agents.a3c.program',
}


def __getattr__(name: str):
  if name in _LAZY:
    import importlib  # pylint: disable=g-import-not-at-top
    return getattr(importlib.import_module(_LAZY[name]), name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
