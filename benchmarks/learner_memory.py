r"""Memory growth per step of IMPALA's learner in one process.

  python benchmarks/learner_memory.py --steps=30000
  python benchmarks/learner_memory.py --steps=30000 --checkpoints --logging
  python benchmarks/learner_memory.py --steps=3000 --trace   # where it grows

A thread writes random unrolls through `UnrollAdder` into a real Reverb
queue (in this process); the learner steps on them. After `--warmup_steps`
it prints the RSS every 5,000 steps and the growth per step; `--trace`
also runs `tracemalloc` and prints the lines whose allocations grew most
(slow: use fewer steps). Switch features on one at a time to find which
one grows: `--checkpoints` (a `FaultTolerance` guard with the config's
checkpoint period), `--logging` (terminal, CSV and TensorBoard logs every
`learner_log_every` steps), `--serve_weights` (one `get_variables` per
step, as actors fetch them).
"""

import gc
import tempfile
import threading
import time
import tracemalloc

from absl import app
from absl import flags
import dm_env
import numpy as np
import psutil
import reverb

from repertory import experiment as experiment_lib
from repertory.agents.impala import config as config_lib
from repertory.agents.actor_critic import learning
from repertory.agents.actor_critic import networks
from repertory.agents.actor_critic import tables as program
from repertory.components import adders

_STEPS = flags.DEFINE_integer('steps', 30000, 'Measured learner steps.')
_WARMUP = flags.DEFINE_integer('warmup_steps', 500, 'Steps before measuring.')
_CHECKPOINTS = flags.DEFINE_bool('checkpoints', False, 'Checkpoint.')
_LOGGING = flags.DEFINE_bool('logging', False, 'Log to CSV and TensorBoard.')
_SERVE = flags.DEFINE_bool('serve_weights', False,
                           'One get_variables call per step.')
_TRACE = flags.DEFINE_bool('trace', False, 'Report tracemalloc growth too.')
_ENV = flags.DEFINE_string('env', 'catch', 'Environment (for its specs).')
_NUM_ENVS = 8


def _feed(client, config, observation_spec, num_actions, stop) -> None:
  """Writes random unrolls until `stop` is set."""
  adder = adders.UnrollAdder(client, program.TABLE, config.unroll_length,
                             _NUM_ENVS, batched_items=config.batched_items)
  rng = np.random.default_rng(0)

  def timestep(step_type):
    return dm_env.TimeStep(
        np.full(_NUM_ENVS, step_type, np.int32),
        np.zeros(_NUM_ENVS, np.float32), np.ones(_NUM_ENVS, np.float32),
        rng.random((_NUM_ENVS,) + observation_spec.shape).astype(
            observation_spec.dtype))

  adder.add_first(timestep(int(dm_env.StepType.FIRST)))
  while not stop.is_set():
    adder.add(rng.integers(0, num_actions, _NUM_ENVS).astype(np.int32),
              timestep(int(dm_env.StepType.MID)),
              extras={'logits': np.zeros((_NUM_ENVS, num_actions),
                                         np.float32)})


def main(argv) -> None:
  del argv
  config = config_lib.Config()
  spec = experiment_lib.environment_spec(_ENV.value)
  observation_spec = spec.observations
  num_actions = networks.num_actions(spec.actions)
  server = reverb.Server(program.make_tables(config, spec,
                                            envs_per_actor=_NUM_ENVS),
                         port=None)
  client = reverb.Client(f'localhost:{server.port}')
  stop = threading.Event()
  threading.Thread(target=_feed, args=(client, config, observation_spec,
                                       num_actions, stop),
                   daemon=True).start()
  # With --checkpoints and/or --logging: a logdir (the learner logs,
  # checkpoints and snapshots there); without either, none.
  learner = learning.make_learner(
      config, spec, client, program.TABLE,
      logdir=(tempfile.mkdtemp() if _CHECKPOINTS.value or _LOGGING.value
              else None))

  def step():
    learner.step()
    if _SERVE.value:
      learner.get_variables([networks.POLICY])

  process = psutil.Process()
  for _ in range(_WARMUP.value):
    step()
  gc.collect()
  if _TRACE.value:
    tracemalloc.start(8)
  before = tracemalloc.take_snapshot() if _TRACE.value else None
  rss0, start = process.memory_info().rss, time.time()
  marks = []
  for i in range(1, _STEPS.value + 1):
    step()
    if i % 5000 == 0:
      marks.append(f'{i}: {process.memory_info().rss / 2**20:.1f} MiB')
  gc.collect()
  rss1 = process.memory_info().rss
  print('RSS at', ', '.join(marks))
  print(f'{_STEPS.value} steps in {time.time() - start:.1f} s; RSS '
        f'{(rss1 - rss0) / _STEPS.value:+.0f} B per step')
  if _TRACE.value:
    stats = tracemalloc.take_snapshot().compare_to(before, 'traceback')
    total = sum(s.size_diff for s in stats)
    print(f'tracemalloc: {total / _STEPS.value:+.0f} B per step; largest:')
    for stat in stats[:6]:
      print(f'{stat.size_diff / _STEPS.value:+8.0f} B per step')
      for line in stat.traceback.format()[-8:]:
        print('    ', line)
  stop.set()
  server.stop()


if __name__ == '__main__':
  app.run(main)
