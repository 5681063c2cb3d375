r"""Raw stepping throughput of batched environments, random actions.

Measures environment steps per second (N environments x batched calls per
second) of `environments.make_batched(spec, N, kind=...)` for each spec, kind
and N, and prints a markdown table. The 'envpool' kind applies only to
EnvPool-backed specs (`envpool:`, `atari:`).

  python benchmarks/env_throughput.py
  python benchmarks/env_throughput.py --specs=catch --num_envs=1,8 \
      --seconds=1
"""

import os
import time
from typing import Tuple

from absl import app
from absl import flags
import numpy as np
import psutil

from repertory import environments

_SPECS = flags.DEFINE_list(
    'specs', ['catch', 'gym:CartPole-v1', 'envpool:CartPole-v1', 'atari:Pong'],
    'Environment specs to measure.')
_KINDS = flags.DEFINE_list('kinds', list(environments.BATCHED_KINDS),
                           'Batched implementations to measure.')
_NUM_ENVS = flags.DEFINE_list('num_envs', ['1', '8', '32'],
                              'Batch sizes N to measure.')
_SECONDS = flags.DEFINE_float('seconds', 2.0,
                              'Measured stepping time per cell.')
_NUM_WORKERS = flags.DEFINE_integer(
    'num_workers', None, "Worker processes for kind='process' "
    '(default min(N, CPUs)).')


def _applies(spec: str, kind: str) -> bool:
  return kind != 'envpool' or spec.split(':')[0] in ('envpool', 'atari')


def _cpu_seconds() -> float:
  """CPU time of this process (all threads) and all its descendants (the
  fork server's workers included)."""
  processes = [psutil.Process()] + psutil.Process().children(recursive=True)
  total = 0.
  for process in processes:
    try:
      times = process.cpu_times()
    except psutil.NoSuchProcess:
      continue
    total += times.user + times.system
  return total


def measure(spec: str, kind: str, num_envs: int,
            seconds: float) -> Tuple[float, float]:
  """(steps per second, steps per CPU-second) of one batched environment,
  after a warm-up. The second figure is what the machine would give without
  other load on it (if CPUs were not the bottleneck, it is a lower bound)."""
  kwargs = {'num_workers': _NUM_WORKERS.value} if kind == 'process' else {}
  with environments.make_batched(spec, num_envs, seed=0, kind=kind,
                                 **kwargs) as batch:
    spec_ = batch.action_spec()
    rng = np.random.RandomState(0)
    actions = rng.randint(spec_.num_values, size=(1024, num_envs)).astype(
        spec_.dtype)
    batch.reset()
    for t in range(20):  # Warm-up.
      batch.step(actions[t])
    calls = 0
    cpu_start = _cpu_seconds()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
      for _ in range(16):
        batch.step(actions[calls % 1024])
        calls += 1
    elapsed = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu_start
  return calls * num_envs / elapsed, calls * num_envs / cpu


def main(argv):
  del argv
  load_before = os.getloadavg()
  sizes = [int(n) for n in _NUM_ENVS.value]
  header = '| spec | kind | ' + ' | '.join(f'N={n}' for n in sizes) + ' |'
  rule = '|' + '---|' * (len(sizes) + 2)
  wall, per_cpu = [header, rule], [header, rule]
  for spec in _SPECS.value:
    for kind in _KINDS.value:
      if not _applies(spec, kind):
        continue
      cells = [measure(spec, kind, n, _SECONDS.value) for n in sizes]
      row = f'| `{spec}` | {kind} | '
      wall.append(row + ' | '.join(f'{w:,.0f}' for w, _ in cells) + ' |')
      per_cpu.append(row + ' | '.join(f'{c:,.0f}' for _, c in cells) + ' |')
      print(wall[-1], flush=True)
  print(f'\nLoad average before/after: {load_before} / {os.getloadavg()}, '
        f'{os.cpu_count()} CPUs.')
  print('\nSteps per second (wall clock; environment steps, all N together), '
        'random actions:\n')
  print('\n'.join(wall))
  print('\nSteps per CPU-second (this process and its workers):\n')
  print('\n'.join(per_cpu))


if __name__ == '__main__':
  app.run(main)
