r"""Where the seconds go from the command to the first training step (local_mp).

  python benchmarks/startup_breakdown.py -- \
      --agent=ppo --env=gym:CartPole-v1

Part 1 times the pieces on their own, each in a fresh process, one after the
other: the interpreter, `import tensorflow`, `import reverb`, `import ray`,
`ray.init()` of a local instance (as local_mp starts it), and `import` of
the modules the driver needs (`repertory.run`'s imports).

Part 2 starts `python -m repertory.run <args after -->` (plus
`--stop_at_return=never`, and `--config.learner_log_every=1` for IMPALA and
SEED, so that a revision whose learners log only every 100 steps is timed to
its first update too) and, every `--every` seconds until the learner's
first `learner.csv` row (its first update) appears, records:

- when the driver printed its first line (flags parsed, agent and program
  built) and `[repertory.launch] ...` (after `ray.init`);
- for every process of the tree: when it appeared, its node (the log file
  its stdout goes to, `<logdir>/nodes/<unit>.log`, or its command), whether
  TensorFlow's Python is loaded in it (`_pywrap_tensorflow_internal.so`
  mapped, soon after its import began; Reverb's C++ client in an actor
  maps only TensorFlow's framework library), and its CPU
  seconds when the first update happened;
- when each node's log file was created (the node's construction starts).

All times are seconds from the moment the command is started. Record
`cat /proc/loadavg` beside the figures: on 2 cores they scale with the
machine's load.
"""

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

from absl import app
from absl import flags
import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import child_process
# pylint: enable=g-import-not-at-top,wrong-import-position

_EVERY = flags.DEFINE_float('every', 0.1, 'Sampling period, seconds.')
_TIMEOUT_S = flags.DEFINE_float('timeout_s', 120.0, 'Give up after this.')
_PIECES = flags.DEFINE_bool('pieces', True, 'Run part 1.')
_PSS_AFTER_S = flags.DEFINE_float(
    'pss_after_s', 10.0, 'After the first update, let the program run this '
    'long more and sample the PSS of every process (the memory of a running '
    'program, periodic evaluation included) once more.')

_PIECE_CODE = {
    'interpreter (python -c pass)': 'pass',
    'import tensorflow': 'import tensorflow',
    'import reverb (pulls tensorflow)': 'import reverb',
    'import ray': 'import ray',
    'import sonnet (pulls tensorflow)': 'import sonnet',
    'import repertory.run (the driver)': 'import repertory.run',
    'import ray + ray.init() (local, all of Ray)': (
        'import ray, time; t = time.time(); '
        "ray.init(address='local', _node_ip_address='127.0.0.1', "
        'include_dashboard=False); '
        "print('INIT', time.time() - t); ray.shutdown()"),
    'import ray + local_mp start (launch.local_ray)': (
        'import time; from repertory.launch.backends import local_ray; import ray; '
        't = time.time(); local_ray.start({}, forward_output=False); '
        "print('INIT', time.time() - t); ray.shutdown()"),
}


def time_pieces() -> None:
  print('Part 1: each piece alone, in a fresh process (wall s, CPU s of '
        'the process and its children)')
  for name, code in _PIECE_CODE.items():
    start = time.time()
    before = os.times()
    result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                            text=True, check=False)
    after = os.times()
    wall = time.time() - start
    cpu = (after.children_user - before.children_user +
           after.children_system - before.children_system)
    extra = ''
    match = re.search(r'INIT ([0-9.]+)', result.stdout)
    if match:
      extra = f' (ray.init alone {float(match.group(1)):.2f} s)'
    status = '' if result.returncode == 0 else f' FAILED rc={result.returncode}'
    print(f'  {name:48s} {wall:6.2f} s wall {cpu:6.2f} s CPU{extra}{status}')


def _label(process: psutil.Process, logdir: str) -> str:
  try:
    target = os.readlink(f'/proc/{process.pid}/fd/1')
    if target.startswith(os.path.join(logdir, 'nodes')) and target.endswith(
        '.log'):
      return 'node ' + os.path.basename(target)[:-len('.log')]
  except OSError:
    pass
  try:
    text = ' '.join(process.cmdline())
  except psutil.Error:
    return 'gone'
  words = text.split()
  first = words[0] if words else ''
  # Ray's agents rename themselves (ray::DashboardAgent); the raylet's own
  # command line names both agents' commands.
  for title, name in (('ray::DashboardAgent', 'dashboard_agent'),
                      ('ray::RuntimeEnvAgent', 'runtime_env_agent')):
    if first == title:
      return name
  scripts = [os.path.basename(w) for w in words[:3]]
  for script, name in (('raylet', 'raylet'), ('gcs_server', 'gcs_server'),
                       ('log_monitor.py', 'log_monitor'),
                       ('monitor.py', 'autoscaler monitor'),
                       ('dashboard.py', 'dashboard (API server)'),
                       ('reaper.py', 'repertory reaper')):
    if script in scripts:
      return name
  if 'repertory.run' in text:
    return 'driver'
  if 'default_worker' in text or first == 'ray::IDLE':
    return 'ray worker (no node yet)'
  if first.startswith('ray::'):
    return first
  return text[:60]


def _has_tensorflow(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/maps') as f:
      return '_pywrap_tensorflow_internal' in f.read()
  except OSError:
    return False


def _pss(root: psutil.Process) -> Dict[int, tuple]:
  """pid -> (label, PSS bytes) of every process of the tree."""
  logdir = _LOGDIR[0]
  result = {}
  try:
    processes = [root] + root.children(recursive=True)
  except psutil.Error:
    return result
  for p in processes:
    try:
      result[p.pid] = (_label(p, logdir), p.memory_full_info().pss)
    except psutil.Error:
      pass
  return result


_LOGDIR = ['']


def breakdown(run_args: List[str]) -> None:
  logdir = tempfile.mkdtemp(prefix='startup_breakdown_')
  _LOGDIR[0] = logdir
  # The learner's first CSV row marks its first update; a revision whose
  # learners log only every `learner_log_every` (100) steps needs this.
  if (any(a in ('--agent=impala', '--agent=seed') for a in run_args) and
      not any(a.startswith('--config.learner_log_every') for a in run_args)):
    run_args = run_args + ['--config.learner_log_every=1']
  command = [sys.executable, '-m', 'repertory.run', f'--logdir={logdir}',
             '--stop_at_return=never', '--eval_episodes=1'] + run_args
  print('\nPart 2:', ' '.join(command[1:]))
  print('  loadavg at start:', open('/proc/loadavg').read().strip())
  t0 = time.time()
  # Its own session (one killpg ends its tree); SIGTERM if this one dies.
  process = child_process.start(command, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
  lines: List[tuple] = []

  def read():
    for line in process.stdout:
      lines.append((time.time() - t0, line.rstrip()))

  threading.Thread(target=read, daemon=True).start()
  root = psutil.Process(process.pid)
  seen: Dict[int, dict] = {}
  node_logs: Dict[str, float] = {}
  log_offsets: Dict[str, int] = {}
  log_lines: List[tuple] = []  # (s from the command, node, line)
  first_step: Optional[float] = None
  nodes_dir = os.path.join(logdir, 'nodes')
  while process.poll() is None and time.time() - t0 < _TIMEOUT_S.value:
    now = time.time() - t0
    try:
      processes = [root] + root.children(recursive=True)
    except psutil.Error:
      break
    for p in processes:
      entry = seen.setdefault(p.pid, {'seen': now, 'process': p})
      entry['label'] = _label(p, logdir)
      if not entry.get('tf') and _has_tensorflow(p.pid):
        entry['tf'] = now
      try:
        cpu = p.cpu_times()
        entry['cpu'] = cpu.user + cpu.system
      except psutil.Error:
        pass
    if os.path.isdir(nodes_dir):
      for name in os.listdir(nodes_dir):
        node = name[:-len('.log')]
        node_logs.setdefault(node, now)
        try:
          with open(os.path.join(nodes_dir, name), 'rb') as f:
            f.seek(log_offsets.get(node, 0))
            data = f.read()
        except OSError:
          continue
        complete = data[:data.rfind(b'\n') + 1]
        log_offsets[node] = log_offsets.get(node, 0) + len(complete)
        for line in complete.decode(errors='replace').splitlines():
          if line.strip() and not line.startswith((' ', 'Traceback')):
            log_lines.append((now, node, line))
    learner_csv = [os.path.join(d, f) for d, _, fs in os.walk(logdir)
                   for f in fs if f == 'learner.csv']
    if any(sum(1 for _ in open(path)) >= 2 for path in learner_csv):
      first_step = now
      break
    time.sleep(_EVERY.value)
  pss_at_first = _pss(root)
  pss_later: Dict[int, tuple] = {}
  if first_step is not None and _PSS_AFTER_S.value > 0:
    end = time.time() + _PSS_AFTER_S.value
    while process.poll() is None and time.time() < end:
      time.sleep(0.5)
      for pid, (label, pss) in _pss(root).items():
        if pss > pss_later.get(pid, ('', 0))[1]:
          pss_later[pid] = (label, pss)
  ended_early = process.poll()  # Not stopped by us: it failed (or finished).
  process.terminate()
  try:
    process.wait(timeout=60)
  except subprocess.TimeoutExpired:
    os.killpg(process.pid, 9)
  print('  loadavg at end:  ', open('/proc/loadavg').read().strip())
  if ended_early is not None:
    print(f'  WARNING: the program ended by itself (exit code {ended_early}) '
          'before it was stopped; its figures after that are not of a '
          'running program. Its last lines:')
    for _, line in lines[-5:]:
      print(f'    {line[:160]}')
  print('  driver output (s from the command):')
  for t, line in lines:
    if line.startswith(('repertory:', '[repertory.launch]')):
      print(f'    {t:6.2f}  {line[:100]}')
  print('  node construction starts (node log file created):')
  for name, t in sorted(node_logs.items(), key=lambda kv: kv[1]):
    print(f'    {t:6.2f}  {name}')
  print('  node log lines (first seen at; first 8 per node, up to the '
        'first update):')
  shown: Dict[str, int] = {}
  for t, node, line in log_lines:
    shown[node] = shown.get(node, 0) + 1
    if shown[node] <= 8:
      print(f'    {t:6.2f}  {node:12s} {line[:100]}')
  print('  processes (appeared at, TensorFlow loaded at, CPU s by the first '
        'update):')
  total_cpu = 0.0
  tf_cpu = 0.0
  for entry in sorted(seen.values(), key=lambda e: e['seen']):
    cpu = entry.get('cpu', 0.0)
    total_cpu += cpu
    tf_at = entry.get('tf')
    if tf_at is not None:
      tf_cpu += cpu
    print(f'    {entry["seen"]:6.2f}  {entry["label"]:32s} TF '
          f'{"-" if tf_at is None else f"{tf_at:6.2f}":>6s}  {cpu:6.2f} CPU s')
  for title, sample in (('at the first update', pss_at_first),
                        (f'peak over the next {_PSS_AFTER_S.value:.0f} s',
                         pss_later)):
    if not sample:
      continue
    print(f'  PSS per process {title} (MiB):')
    for pid, (label, pss) in sorted(sample.items(), key=lambda kv: -kv[1][1]):
      print(f'    {pss / 2**20:7.1f}  {label}')
    print(f'    {sum(v[1] for v in sample.values()) / 2**30:7.2f} GiB in all '
          f'({len(sample)} processes)')
  print(f'  first learner update at {first_step if first_step is not None else "never"}'
        f' s; CPU seconds of the tree by then {total_cpu:.1f} '
        f'({tf_cpu:.1f} in processes with TensorFlow loaded; '
        f'{sum(1 for e in seen.values() if e.get("tf"))} of {len(seen)} '
        'processes loaded it)')


def main(argv):
  run_args = argv[1:]
  if run_args and run_args[0] == '--':
    run_args = run_args[1:]
  if _PIECES.value:
    time_pieces()
  breakdown(run_args or ['--agent=ppo', '--env=gym:CartPole-v1'])


if __name__ == '__main__':
  app.run(main)
