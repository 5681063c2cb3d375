r"""Where the CPU of a training step goes: CPU microseconds per environment
step of a running program, by part, for each architecture.

  python benchmarks/cpu_breakdown.py --runners=ppo,impala,seed \
      --json_out=/tmp/breakdown.json
  python benchmarks/cpu_breakdown.py --breakdown_from=/tmp/breakdown.json
  python benchmarks/cpu_breakdown.py --runners=ppo \
      --flag=--config.batched_items=false      # what a setting costs

Each run is `sb3_side_by_side.py`'s command for the runner (the docs'
CartPole command, in local_mp, started as a child process as a user types
it; `sb3`: Stable-Baselines3's PPO with rl-zoo's settings, one process,
its whole CPU in one row) with a budget it does not reach. Once its learner has logged its first
update and `--warmup_s` seconds have passed, the window opens at one row of
the run's `progress.csv` and closes at the first row `--window_s` later, so
the environment steps in it are the run's own count (`actor_steps`).

In the window:

- every process of the run's tree gives its CPU seconds (`/proc/<pid>/stat`,
  user + system, all threads): Ray's own processes (GCS, raylet, its
  agents), the driver and each node process;
- `py-spy` samples each node process's Python threads (`--pyspy_rate` per second,
  working samples only); each sample is put in the first of `PARTS` that
  one of its frames' files matches (counting/logging/evaluation,
  environment, policy, adder, reading the queue or replay, Reverb's Python
  side, weights and transport, the learner's update, Ray's Python side;
  else "other Python"). A node process's CPU is split by its
  samples: its Python threads' CPU (samples / rate, at most the process's
  CPU) by part, and the rest, native threads without Python frames
  (TensorFlow's thread pools, Reverb's and gRPC's), as "native threads" of
  the process's role (learner or actor, by what its samples ran).

Each run starts once the one-minute load average is below `--max_load`.
The table has a row per part and a column per run: CPU microseconds per
environment step, then the total, env steps/s, and the one-minute load
average when the command started and when the window opened (the run's own
start-up raises it). py-spy's own CPU is not in it, but it shares the cores:
steps/s in the window are lower than without it.

Needs `py-spy` (the `bench` extra): `pip install 'repertory[bench]'`.
"""

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from absl import app
from absl import flags
import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import sb3_side_by_side
# pylint: enable=g-import-not-at-top,wrong-import-position

_RUNS = flags.DEFINE_list('runners', ['ppo', 'impala', 'seed'],
                          "Runners (sb3_side_by_side.py's), in order.")
_FLAG = flags.DEFINE_multi_string('flag', [], 'A flag added to every run\'s '
                                  'command (--flag=--config.batched_items='
                                  'false): what a setting costs.')
_SECONDS = flags.DEFINE_float('window_s', 20.0, 'The window, at least.')
_WARMUP = flags.DEFINE_float('warmup_s', 5.0, 'Seconds after the first '
                             'update before the window opens.')
_RATE = flags.DEFINE_integer('pyspy_rate', 50, "py-spy's samples per second.")
_MAX_LOAD = flags.DEFINE_float('max_load', 1.5, 'Each run starts once the '
                               'one-minute load average is below this.')
_START_TIMEOUT = flags.DEFINE_float('start_timeout', 120.0, 'Seconds to wait '
                                    'for the first update.')
_OUT = flags.DEFINE_string('json_out', '/tmp/cpu_breakdown.json', 'The runs, as '
                           'JSON.')
_TABLE_FROM = flags.DEFINE_string('breakdown_from', '', 'Only print the table of '
                                  'the runs in this JSON file.')

# (part, pattern of a frame's file), by priority: a sample is in the first
# part any of its frames matches (a TensorFlow call made to publish weights
# is publishing, not the update).
PARTS = (
    ('counting, logging, evaluation', r'repertory/components/(counting|'
                                      r'loggers|evaluation)/'),
    ('environment', r'repertory/environments/|(^|/)(gymnasium|gym|envpool|'
                    r'minatar|open_spiel)/|pyspiel'),
    ('policy (actors, inference)', r'numpy_mlp|numpy_policy|mlp_policy|'
                                   r'lstm_policy|repertory/components/'
                                   r'inference/'),
    ('adder', r'repertory/components/adders/'),
    ('reading the queue or replay', r'(^|/)tensorflow/python/data/|'
                                    r'/rounds\.py|repertory/components/'
                                    r'replay/'),
    ('Reverb (Python side)', r'(^|/)reverb/'),
    ('weights and transport', r'repertory/launch/transport/|repertory/'
                              r'components/(variables/|networks/variables)'),
    ('learner update', r'repertory/components/(learners|losses)/|'
                       r'/learning\.py|(^|/)(tensorflow|sonnet|keras)/'),
    ('Ray (Python side)', r'(^|/)ray/'),
)
_FRAME = re.compile(r'\((?P<file>[^()]*?)(?::\d+)?\)$')
_LEARNER = 'learner update'
_RAY_PROCESSES = ('gcs_server', 'raylet', 'dashboard', 'runtime_env',
                  'log_monitor', 'monitor.py', 'ray::Dashboard',
                  'ray::RuntimeEnv')


def part_of(stack: str) -> str:
  """The part of one py-spy raw stack (frames root first, ';'-separated)."""
  paths = []
  for frame in stack.split(';'):
    match = _FRAME.search(frame)
    paths.append(match.group('file') if match else frame)
  for part, pattern in PARTS:
    if any(re.search(pattern, path) for path in paths):
      return part
  return 'other Python'


def classify(raw: str) -> Tuple[Dict[str, int], Dict[str, int]]:
  """Samples per part of a py-spy raw profile (`stack count` lines), and
  the 20 commonest innermost frames of the samples in no part."""
  counts, unplaced = collections.Counter(), collections.Counter()
  for line in raw.splitlines():
    stack, _, n = line.rpartition(' ')
    if stack and n.isdigit():
      part = part_of(stack)
      counts[part] += int(n)
      if part == 'other Python':
        unplaced[stack.split(';')[-1]] += int(n)
  return dict(counts), dict(unplaced.most_common(20))


def _cpu_seconds(process: psutil.Process) -> Optional[float]:
  try:
    times = process.cpu_times()
    return times.user + times.system
  except psutil.Error:
    return None


def _tree(root: psutil.Process) -> Dict[int, psutil.Process]:
  try:
    return {p.pid: p for p in [root] + root.children(recursive=True)}
  except psutil.Error:
    return {root.pid: root}


def _role(process: psutil.Process, root: psutil.Process) -> str:
  """'ray' (Ray's own), 'driver', 'node' (a node process) or 'other'."""
  try:
    text = ' '.join(process.cmdline()) or process.name()
  except psutil.Error:
    return 'other'
  if process.pid == root.pid:
    return 'driver'
  if any(name in text for name in _RAY_PROCESSES):
    return 'ray'
  if text.startswith('ray::'):
    return 'node'
  return 'other'


def _progress_rows(path: str) -> List[Dict[str, str]]:
  """Progress rows of the running program (not evaluation rows)."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    lines = f.read().splitlines()
  if len(lines) < 2:
    return []
  header = lines[0].split(',')
  rows = [dict(zip(header, line.split(','))) for line in lines[1:]
          if line.count(',') == len(header) - 1]
  return [r for r in rows if r.get('episode_return_mean', '') != '' or
          r.get('actor_steps_per_second', '') != '']


def _wait_for_row(path: str, after: int, deadline: float
                  ) -> Optional[Tuple[int, Dict[str, str]]]:
  """(index, row) of the first progress row past index `after`."""
  while time.monotonic() < deadline:
    rows = _progress_rows(path)
    if len(rows) > after + 1:
      return after + 1, rows[after + 1]
    time.sleep(0.02)
  return None


def _first_update(runner: str, logdir: str, deadline: float) -> bool:
  while time.monotonic() < deadline:
    if sb3_side_by_side._first_step_time(runner, logdir) is not None:  # pylint: disable=protected-access
      return True
    time.sleep(0.1)
  return False


def measure(runner: str) -> Dict[str, Any]:
  """One run's window (see the module docstring)."""
  while os.getloadavg()[0] >= _MAX_LOAD.value:  # The last run's tail.
    time.sleep(5)
  load_at_start = open('/proc/loadavg').read().split()[:3]
  logdir = tempfile.mkdtemp(prefix=f'breakdown_{runner}_')
  command = sb3_side_by_side.runner_command(runner, 0, logdir,
                                           sb3_timesteps=10**9)
  if runner != 'sb3':
    command = [a for a in command if not a.startswith('--max_actor_steps=')]
    command += ['--max_actor_steps=1000000000', *_FLAG.value]
  child = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
  root = psutil.Process(child.pid)
  try:
    if not _first_update(runner, logdir, time.monotonic() + _START_TIMEOUT.value):
      raise RuntimeError(f'{runner}: no learner update in '
                         f'{_START_TIMEOUT.value:.0f}s ({logdir}).')
    time.sleep(_WARMUP.value)
    progress = os.path.join(logdir, 'progress.csv')
    index = len(_progress_rows(progress)) - 1
    found = _wait_for_row(progress, index, time.monotonic() + 60)
    if found is None:
      raise RuntimeError(f'{runner}: no progress row ({progress}).')
    index, first = found
    load = open('/proc/loadavg').read().split()[:3]
    processes = _tree(root)
    roles = {pid: _role(p, root) for pid, p in processes.items()}
    start = {pid: _cpu_seconds(p) for pid, p in processes.items()}
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix='pyspy_')
    spies = {}
    for pid in processes:
      if roles[pid] == 'node':
        path = os.path.join(tmp, f'{pid}.txt')
        spies[pid] = (subprocess.Popen(
            ['py-spy', 'record', '--pid', str(pid), '--rate',
             str(_RATE.value), '--format', 'raw', '--nonblocking',
             '--duration', str(int(_SECONDS.value + 15)), '-o', path],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), path)
    while True:
      found = _wait_for_row(progress, index, time.monotonic() + 60)
      if found is None:
        raise RuntimeError(f'{runner}: the progress rows stopped.')
      index, last = found
      if time.monotonic() - t0 >= _SECONDS.value:
        break
    seconds = time.monotonic() - t0
    end = {pid: _cpu_seconds(p) for pid, p in _tree(root).items()}
    for proc, _ in spies.values():
      proc.send_signal(signal.SIGINT)  # py-spy writes what it has.
    samples, unplaced = {}, {}
    for pid, (proc, path) in spies.items():
      try:
        proc.wait(timeout=60)
      except subprocess.TimeoutExpired:
        proc.kill()
      if os.path.exists(path):
        with open(path) as f:
          samples[pid], unplaced[pid] = classify(f.read())
    shutil.rmtree(tmp, ignore_errors=True)
  finally:
    try:
      os.killpg(child.pid, signal.SIGTERM)
      child.wait(timeout=60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
      os.killpg(child.pid, signal.SIGKILL)
    shutil.rmtree(logdir, ignore_errors=True)
  cpu = {pid: end[pid] - start[pid] for pid in start
         if start[pid] is not None and end.get(pid) is not None}
  return {'runner': runner, 'flags': list(_FLAG.value) if runner != 'sb3'
          else [], 'command': command, 'load_average': load,
          'load_at_start': load_at_start,
          'window_seconds': seconds,
          'env_steps': float(last['actor_steps']) - float(
              first['actor_steps']),
          'cpu_seconds': {str(pid): cpu[pid] for pid in cpu},
          'roles': {str(pid): roles[pid] for pid in cpu},
          'samples': {str(pid): s for pid, s in samples.items()},
          'other_python_frames': {str(pid): s for pid, s in unplaced.items()},
          'rate': _RATE.value, 'cores': psutil.cpu_count()}


def parts(run: Dict[str, Any]) -> Dict[str, float]:
  """CPU microseconds per env step by part (see the module docstring)."""
  out = collections.Counter()
  steps = run['env_steps']
  for pid, cpu in run['cpu_seconds'].items():
    role = run['roles'][pid]
    if run['runner'] == 'sb3':  # One process: environment, policy, update.
      out['SB3 (its one process)'] += cpu
    elif role == 'ray':
      out["Ray's processes (GCS, raylet, agents)"] += cpu
    elif role == 'driver':
      out['driver (python -m repertory.run)'] += cpu
    elif role == 'other':
      out['other processes'] += cpu
    else:
      samples = run['samples'].get(pid, {})
      python = min(cpu, sum(samples.values()) / run['rate'])
      total = sum(samples.values()) or 1
      for part, n in samples.items():
        out[part] += python * n / total
      kind = ('learner' if samples.get(_LEARNER, 0) > 0.05 * total
              else 'actor')
      out[f'native threads ({kind} processes)'] += cpu - python
  return {k: 1e6 * v / steps for k, v in out.items()}


def table(runs: List[Dict[str, Any]]) -> str:
  """The Markdown table: parts x runs, CPU microseconds per env step."""
  by_run = [parts(run) for run in runs]
  order = [p for p, _ in PARTS] + ['other Python']
  names = sorted({k for r in by_run for k in r},
                 key=lambda k: (order.index(k) if k in order else len(order),
                                k))
  lines = ['| CPU µs per env step | ' + ' | '.join(
      ' '.join([r['runner'], *r.get('flags', [])]) for r in runs) + ' |',
           '|---|' + '---:|' * len(runs)]
  for name in names:
    lines.append(f'| {name} | ' + ' | '.join(
        f'{r[name]:.1f}' if name in r else '—' for r in by_run) + ' |')
  lines.append('| **total** | ' + ' | '.join(
      f'**{sum(r.values()):.1f}**' for r in by_run) + ' |')
  lines.append('| env steps per CPU-second | ' + ' | '.join(
      f'{1e6 / sum(r.values()):,.0f}' for r in by_run) + ' |')
  lines.append('| env steps/s in the window | ' + ' | '.join(
      f"{r['env_steps'] / r['window_seconds']:,.0f}" for r in runs) + ' |')
  lines.append('| load average at the command / the window | ' + ' | '.join(
      f"{r.get('load_at_start', ['-'])[0]} / {r['load_average'][0]}"
      for r in runs) + ' |')
  return '\n'.join(lines)


def main(argv: List[str]) -> None:
  del argv
  if _TABLE_FROM.value:
    with open(_TABLE_FROM.value) as f:
      print(table(json.load(f)))
    return
  if shutil.which('py-spy') is None:
    sys.exit("cpu_breakdown: needs py-spy: pip install 'repertory[bench]'")
  runs = []
  for runner in _RUNS.value:
    print(f'== {runner}', flush=True)
    runs.append(measure(runner))
    with open(_OUT.value, 'w') as f:
      json.dump(runs, f, indent=1)
  print(table(runs))


if __name__ == '__main__':
  app.run(main)
