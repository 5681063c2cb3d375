r"""Raw stepping throughput of batched environments, random actions.

Measures environment steps per second (N environments x batched calls per
second) of `environments.make_batched(spec, N, kind=...)` for each spec, kind
and N, and prints a markdown table. The 'envpool' kind applies only to
EnvPool-backed specs (`envpool:`, `atari:`).

  python benchmarks/env_throughput.py
  python benchmarks/env_throughput.py --specs=catch --num_envs=1,8 \
      --seconds=1
"""

import time

from absl import app
from absl import flags
import numpy as np

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


def measure(spec: str, kind: str, num_envs: int, seconds: float) -> float:
  """Steps per second of one batched environment (after a warm-up)."""
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
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
      for _ in range(16):
        batch.step(actions[calls % 1024])
        calls += 1
    elapsed = time.perf_counter() - start
  return calls * num_envs / elapsed


def main(argv):
  del argv
  sizes = [int(n) for n in _NUM_ENVS.value]
  header = '| spec | kind | ' + ' | '.join(f'N={n}' for n in sizes) + ' |'
  lines = [header, '|' + '---|' * (len(sizes) + 2)]
  for spec in _SPECS.value:
    for kind in _KINDS.value:
      if not _applies(spec, kind):
        continue
      cells = [f'{measure(spec, kind, n, _SECONDS.value):,.0f}'
               for n in sizes]
      lines.append(f'| `{spec}` | {kind} | ' + ' | '.join(cells) + ' |')
      print(lines[-1], flush=True)
  print('\nSteps per second (environment steps, all N together), random '
        'actions:\n')
  print('\n'.join(lines))


if __name__ == '__main__':
  app.run(main)
