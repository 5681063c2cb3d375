"""The V-trace actor-critic that IMPALA and SEED share: settings, networks
and their batched policy, the unroll queue, the learner algorithm and an
evaluation actor. Importing this package imports no TensorFlow; import its
modules (`config` stays light, the others import TensorFlow).
"""
