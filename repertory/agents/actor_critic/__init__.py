"""The V-trace actor-critic that IMPALA and SEED share: settings, networks
and their batched policy, the unroll queue, the learner algorithm, an
evaluation actor and the program nodes built from them (`nodes`, whose
queue-fed graph NeuRD builds too).
Importing this package imports no TensorFlow; import its modules (`config`,
`tables` and `nodes` stay light, the others import TensorFlow).
"""
