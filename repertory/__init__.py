"""repertory: distributed reinforcement learning from small reusable parts."""

__version__ = '0.1.0'
