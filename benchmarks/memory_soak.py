r"""Memory soak: RSS of every node process of a long run, sampled into a CSV.

  python benchmarks/memory_soak.py --minutes=30 --every=30 \
      --out=/tmp/soak/rss.csv -- --agent=impala --env=catch --num_actors=2

Starts `python -m repertory.run <args after -->` in local_mp (with an
unbounded step budget and `--stop_at_return=never`), then every `--every`
seconds writes one row per process of the run: the time, the node (a Ray
node process is named by the log file its stdout goes to,
`<logdir>/nodes/<unit>.log`; others by their command: driver, raylet,
gcs_server, ...) and its RSS in MiB. After `--minutes` it sends SIGTERM and
waits for the run to end, then prints, per node, the RSS at 5 minutes (after
warm-up), at the end, and the slope (MiB per 10 minutes) of a least-squares
line through the samples after warm-up.
"""

import csv
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Tuple

from absl import app
from absl import flags
import psutil

_MINUTES = flags.DEFINE_float('minutes', 30.0, 'How long to run.')
_EVERY = flags.DEFINE_float('every', 30.0, 'Seconds between samples.')
_OUT = flags.DEFINE_string('out', '/tmp/repertory_soak/rss.csv', 'CSV path.')
_WARMUP = flags.DEFINE_float('warmup_minutes', 5.0,
                             'Samples before this are left out of the slope.')
_START_ATTEMPTS = flags.DEFINE_integer('start_attempts', 5,
                                      'Tries to start the run.')
_NICE = flags.DEFINE_integer(
    'nice', 19, 'Niceness given to every process of the run once it has '
    'started (Ray start-up times out after 30 s if starved, so the run '
    'starts at normal priority).')
_NICE_AFTER = flags.DEFINE_float('nice_after_seconds', 90.0,
                                 'When to lower the run priority.')


def _label(process: psutil.Process) -> str:
  try:
    target = os.readlink(f'/proc/{process.pid}/fd/1')
    if '/nodes/' in target and target.endswith('.log'):
      return os.path.basename(target)[:-len('.log')]
  except OSError:
    pass
  try:
    cmdline = process.cmdline()
  except psutil.Error:
    return 'gone'
  text = ' '.join(cmdline)
  for name in ('raylet', 'gcs_server', 'dashboard', 'log_monitor',
               'runtime_env'):
    if name in text:
      return name
  if 'monitor.py' in text:
    return 'ray_monitor'
  if cmdline and cmdline[0].startswith('ray::'):
    return cmdline[0]
  return os.path.basename(cmdline[0]) if cmdline else process.name()


def _sample(root: psutil.Process, nice: int = None) -> Dict[str, float]:
  """node label -> RSS MiB (summed over processes sharing a label)."""
  result: Dict[str, float] = {}
  try:
    processes = [root] + root.children(recursive=True)
  except psutil.Error:
    return result
  for process in processes:
    try:
      if nice is not None and process.nice() < nice:
        process.nice(nice)
      rss = process.memory_info().rss / 2**20
      label = 'driver' if process.pid == root.pid else _label(process)
    except psutil.Error:
      continue
    if label.startswith('ray::IDLE') or label == 'gone':
      continue
    result[label] = result.get(label, 0.0) + rss
  return result


def _started(logdir: str, proc: subprocess.Popen, timeout: float) -> bool:
  """Waits until the run's node logs appear; False if it exited first."""
  end = time.monotonic() + timeout
  while time.monotonic() < end:
    if proc.poll() is not None:
      return False
    if os.path.isdir(os.path.join(logdir, 'nodes')):
      return True
    time.sleep(1.0)
  return False


def _slope(points: List[Tuple[float, float]]) -> float:
  """Least-squares slope (y per x) of points."""
  n = len(points)
  if n < 2:
    return 0.0
  mx = sum(x for x, _ in points) / n
  my = sum(y for _, y in points) / n
  var = sum((x - mx) ** 2 for x, _ in points)
  return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def summarize(path: str, warmup_minutes: float) -> str:
  """A table of RSS at warm-up end, at the end and the slope, per node."""
  series: Dict[str, List[Tuple[float, float]]] = {}
  with open(path) as f:
    for row in csv.DictReader(f):
      series.setdefault(row['node'], []).append(
          (float(row['minutes']), float(row['rss_mib'])))
  lines = [f'{"node":<28} {"rss@warm":>9} {"rss@end":>9} {"max":>9} '
           f'{"MiB/10min":>10} samples']
  for node, points in sorted(series.items()):
    after = [p for p in points if p[0] >= warmup_minutes] or points
    lines.append(
        f'{node:<28} {after[0][1]:9.1f} {points[-1][1]:9.1f} '
        f'{max(y for _, y in points):9.1f} {10 * _slope(after):10.2f} '
        f'{len(points)}')
  return '\n'.join(lines)


def main(argv):
  run_args = argv[1:]
  if run_args and run_args[0] == '--':
    run_args = run_args[1:]
  out = _OUT.value
  os.makedirs(os.path.dirname(out) or '.', exist_ok=True)
  logdir = os.path.join(os.path.dirname(out) or '.', 'run')
  command = [sys.executable, '-m', 'repertory.run', '--lp_launch_type=local_mp',
             '--max_actor_steps=1000000000000', '--stop_at_return=never',
             f'--logdir={logdir}'] + run_args
  print('soak:', ' '.join(command), flush=True)
  for attempt in range(_START_ATTEMPTS.value):
    # One log per attempt (run.out, then run.1.out, ...): a failed start
    # stays readable.
    name = 'run.out' if attempt == 0 else f'run.{attempt}.out'
    with open(os.path.join(os.path.dirname(out) or '.', name), 'w') as log:
      proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    # On a loaded machine Ray's start-up can time out (30 s, fixed): retry.
    if not _started(logdir, proc, timeout=300):
      print(f'attempt {attempt + 1}: the run did not start (exit code '
            f'{proc.poll()}); retrying', flush=True)
      if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
      continue
    break
  else:
    sys.exit('The run did not start; see run.out.')
  root = psutil.Process(proc.pid)
  start = time.monotonic()
  end = start + 60 * _MINUTES.value
  try:
    with open(out, 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['minutes', 'node', 'rss_mib'])
      while time.monotonic() < end and proc.poll() is None:
        minutes = (time.monotonic() - start) / 60
        nice = (_NICE.value if time.monotonic() - start > _NICE_AFTER.value
                else None)
        for node, rss in sorted(_sample(root, nice).items()):
          writer.writerow([f'{minutes:.2f}', node, f'{rss:.1f}'])
        f.flush()
        time.sleep(_EVERY.value)
  finally:
    if proc.poll() is None:
      proc.send_signal(signal.SIGTERM)
      try:
        proc.wait(120)
      except subprocess.TimeoutExpired:
        proc.kill()
  print(f'run exited with {proc.returncode}')
  print(summarize(out, _WARMUP.value))


if __name__ == '__main__':
  app.run(main)
