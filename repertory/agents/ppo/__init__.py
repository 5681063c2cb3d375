"""Synchronous PPO: every round, all actors act with one policy version.

  python -m repertory.run --agent=ppo --env=gym:CartPole-v1 \
      --lp_launch_type=local_mp
"""

from repertory.agents.ppo.config import Config
from repertory.agents.ppo.program import make_program
