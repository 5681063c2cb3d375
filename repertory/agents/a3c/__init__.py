"""A3C: asynchronous actor-critic with a parameter-server learner.

  python -m repertory.run --agent=a3c --env=catch --lp_launch_type=local_mp
"""

from repertory.agents.a3c.config import Config
from repertory.agents.a3c.program import make_program
