"""Synchronous rounds (PPO's): every actor acts with one policy version, the
learner trains on exactly that round's items, then publishes the next one.

    collector = RoundCollector(replay, table, num_actors, items_per_actor,
                               round_timeout_s)
    batch = collector.collect(learner_version, stopping)   # the learner
    version = wait_for_version(learner, wanted, stop, timeout_s)  # an actor

See `rounds.py`.
"""

from repertory.components.rounds.rounds import PolicyLagError
from repertory.components.rounds.rounds import RoundCollector
from repertory.components.rounds.rounds import RoundTimeoutError
from repertory.components.rounds.rounds import wait_for_version
