"""The inference server, built in the learner's process (SEED's default
placement), leaves the learner TensorFlow's thread pools."""

import os
import subprocess
import sys

_CODE = '''
from repertory import experiment as experiment_lib
from repertory.agents import seed
from repertory.agents.seed import networks
from repertory.agents.actor_critic import learning
import tensorflow as tf
config = seed.Config(hidden_sizes=(8,))
spec = experiment_lib.environment_spec('catch')
policy = networks.make_policy(config, spec)  # The server's, built first.
assert type(policy).__name__ == 'Policy', policy  # TensorFlow's.
learning.VTrace(config, spec, replay=None, table='queue')
print(tf.config.threading.get_inter_op_parallelism_threads(),
      tf.config.threading.get_intra_op_parallelism_threads())
'''


def test_server_policy_leaves_the_learner_processes_thread_pools():
  # A fresh process: TensorFlow fixes its pools when it first runs, so the
  # node that runs first decides for every node of the process.
  # With a GPU visible the server's policy is TensorFlow's (without one it
  # is numpy's, which has no pools to touch); a CPU build of TensorFlow runs
  # it on the CPU all the same.
  result = subprocess.run([sys.executable, '-c', _CODE], capture_output=True,
                          text=True, timeout=300, check=False,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES='0'))
  assert result.returncode == 0, result.stderr[-2000:]
  # 0 0: TensorFlow's defaults (a thread per core), not 1 1.
  assert result.stdout.split()[-2:] == ['0', '0'], result.stdout
