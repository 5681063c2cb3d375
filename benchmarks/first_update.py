r"""PPO's first update in one process: tracing and instantiating, then later.

  python benchmarks/first_update.py
  python benchmarks/first_update.py --optimizers=repertory,sonnet --repeats=3

Builds PPO's algorithm (the default config, CartPole-v1's spec, a round of
2 actors x 8 environments x 32 steps of random data), then times its first
`train_on_round` (GAE's graph and the epochs graph traced and instantiated,
unoptimised: `learners.OptimizedLater`) and the mean of `--rounds` later
rounds once the optimised graph is in (after round 11). Each measurement
runs in a fresh process (TensorFlow keeps traced graphs for the life of
one), the optimizers alternating: 'repertory' is `learners.Adam` (what
every learner uses), 'sonnet' is `snt.optimizers.Adam` put in its place
before anything is traced.
"""

import json
import subprocess
import sys
import time

from absl import app
from absl import flags

_OPTIMIZERS = flags.DEFINE_list('optimizers', ['repertory', 'sonnet'],
                                "Optimizers to time: 'repertory', 'sonnet'.")
_REPEATS = flags.DEFINE_integer('repeats', 2, 'Fresh processes per optimizer.')
_ROUNDS = flags.DEFINE_integer('rounds', 40, 'Later rounds timed.')
_ONE = flags.DEFINE_string('one', '', 'Internal: time this optimizer here.')


def time_one(optimizer: str, rounds: int) -> dict:
  """Times the first and later rounds in this process."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  import sonnet as snt
  from repertory import experiment as experiment_lib
  from repertory.agents.ppo import config as config_lib
  from repertory.agents.ppo import learning
  from repertory.components import learners
  # pylint: enable=g-import-not-at-top
  spec = experiment_lib.environment_spec('gym:CartPole-v1')
  config = config_lib.Config()
  algorithm = learning.PPO(config, spec, None, config.steps_per_round(2, 8),
                           anneal_steps=10**6)
  if optimizer == 'sonnet':
    algorithm.optimizer = snt.optimizers.Adam(
        config.learning_rate, epsilon=config.adam_epsilon)
    learners.create_optimizer_state(algorithm.optimizer,
                                    algorithm.network.trainable_variables)
  steps, envs = config.unroll_length + 1, 2 * 8
  rng = np.random.default_rng(0)
  batch = {
      'observation': rng.normal(size=(steps, envs, 4)).astype(np.float32),
      'reward': np.ones((steps, envs), np.float32),
      'discount': np.ones((steps, envs), np.float32),
      'step_type': np.ones((steps, envs), np.int32),
      'action': rng.integers(0, 2, size=(steps, envs)),
      'extras': {'value': np.zeros((steps, envs), np.float32),
                 'log_prob': np.full((steps, envs), -np.log(2), np.float32)}}
  start = time.perf_counter()
  algorithm.train_on_round(batch)
  first = time.perf_counter() - start
  for _ in range(12):  # Past the switch to the optimised graph (round 11).
    algorithm.train_on_round(batch)
  start = time.perf_counter()
  for _ in range(rounds):
    algorithm.train_on_round(batch)
  later = (time.perf_counter() - start) / rounds
  return {'optimizer': optimizer, 'first_round_s': first,
          'later_round_ms': later * 1e3}


def main(argv):
  del argv
  for optimizer in [_ONE.value] if _ONE.value else _OPTIMIZERS.value:
    if optimizer not in ('repertory', 'sonnet'):  # Before anything runs.
      sys.exit(f"first_update.py: {optimizer!r} is not 'repertory' or "
               "'sonnet'.")
  if _ONE.value:
    print(json.dumps(time_one(_ONE.value, _ROUNDS.value)))
    return
  print('loadavg:', open('/proc/loadavg').read().strip())
  for _ in range(_REPEATS.value):
    for optimizer in _OPTIMIZERS.value:
      output = subprocess.run(
          [sys.executable, __file__, f'--one={optimizer}',
           f'--rounds={_ROUNDS.value}'], capture_output=True, text=True,
          check=True).stdout
      result = json.loads(output.strip().splitlines()[-1])
      print(f"  {optimizer:9s}  first round {result['first_round_s']:.3f} s"
            f"   later rounds {result['later_round_ms']:.1f} ms")
  print('loadavg:', open('/proc/loadavg').read().strip())


if __name__ == '__main__':
  app.run(main)
