"""The prioritized-replay family that Ape-X and R2D2 share: the settings
(`config`), the program graph
(a prioritized Reverb table, actors, a learner that writes priorities back),
the actor that writes items with their initial priorities, and the learner
algorithm that samples, weights by importance and updates priorities.
Import its modules (`program`, `acting`, `learning`).
"""
