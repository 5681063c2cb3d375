"""A3C: asynchronous actor-critic with a parameter-server learner.

  python -m repertory.run --agent=a3c --env=catch --lp_launch_type=local_mp
"""

from repertory import launch
from repertory.agents.a3c.config import Config

# Everything else is imported when first asked for (`a3c.make_program`):
# the registry (`agents.get`) and the driver read `Config` without
# importing TensorFlow.
__getattr__ = launch.lazy_attributes(__name__, {
    'make_program': 'repertory.agents.a3c.program',
})
