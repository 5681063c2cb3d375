"""SEED trains with IMPALA's V-trace learner (one idea, one place): the data
the inference server writes has exactly the layout IMPALA's actors write."""

from repertory.agents.impala.learning import VTraceLearner

__all__ = ['VTraceLearner']
