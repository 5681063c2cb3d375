"""Actors across hosts against the same actors on one host (root only).

    python benchmarks/cluster_hosts.py --agents=impala,seed --seconds=60

Starts a Ray cluster of three hosts in network namespaces
(`repertory.cluster.hosts`: host 1 the head with no CPUs for Ray, hosts 2
and 3 one CPU each) and runs, for each agent, `repertory.run` on catch from
host 1 twice: the actors on hosts 2 and 3 (`actor=cpu:1`), then the same
actors on host 1 (`actor=host1:1`); the learner, replay, counter, monitor
(and SEED's inference, which shares the learner's process) on host 1 both
times. Each run is measured over `--seconds` after `--warmup_seconds` from
its progress log, then interrupted. Prints one table row per agent:

- start-up: from the command to the first progress line with actor steps
  (the program of the run across hosts, on the running cluster), and the
  cluster's own start;
- actor steps/s across hosts and on one host;
- the cross-host hop per actor call: the difference of the time each
  actor spends per step of its environments (one inference call per step
  for SEED, one weights check per unroll for IMPALA) across hosts and on
  one host.
"""

import os
import shutil
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Tuple

from absl import app
from absl import flags

from repertory import testing
from repertory.cluster import hosts
from repertory.cluster import netns

_AGENTS = flags.DEFINE_list('agents', ['impala', 'seed'], 'Agents to run.')
_SECONDS = flags.DEFINE_float('seconds', 60.0, 'Measured seconds per run.')
_WARMUP = flags.DEFINE_float('warmup_seconds', 20.0,
                             'Seconds after the first actor step not measured.')
_NUM_ACTORS = flags.DEFINE_integer('num_actors', 2, 'Actors per run.')
_ENVS = flags.DEFINE_integer('envs_per_actor', 8, 'Environments per actor.')
_KEEP = flags.DEFINE_bool('keep_runs', False,
                          "Keep the runs' directories (removed by default).")

_LINE = re.compile(r'\[\s*([\d.]+)s\] actor_steps=(\d+)')
_HOST1 = 'learner=host1:1 replay=host1:1 counter=host1:1 monitor=host1:1'


def _progress(logdir: str) -> List[Tuple[float, int]]:
  try:
    with open(os.path.join(logdir, 'progress.log')) as f:
      return [(float(t), int(s)) for t, s in _LINE.findall(f.read())]
  except FileNotFoundError:
    return []


def measure(cluster: hosts.Cluster, agent: str, actors: str,
            root: str) -> Tuple[float, float]:
  """(seconds to the first actor step, actor steps/s) of one run."""
  logdir = os.path.join(root, f'{agent}-{actors.split("=")[1].split(":")[0]}')
  argv = [sys.executable, '-m', 'repertory.run', f'--agent={agent}',
          '--env=catch', f'--num_actors={_NUM_ACTORS.value}',
          f'--envs_per_actor={_ENVS.value}', '--lp_launch_type=ray',
          f'--ray_address={cluster.address}',
          f'--lp_resources={_HOST1} {actors}', f'--logdir={logdir}',
          '--max_actor_steps=1000000000', '--stop_at_return=never',
          '--eval_every_steps=0', '--progress_every_seconds=1']
  start = time.monotonic()
  with open(os.path.join(root, f'{os.path.basename(logdir)}.log'), 'w') as log:
    driver = cluster.popen(1, argv, stdout=log, stderr=subprocess.STDOUT,
                           preexec_fn=testing.like_a_shell)
  try:
    while not any(s > 0 for _, s in _progress(logdir)):
      if driver.poll() is not None:
        raise RuntimeError(f'{agent} ended with {driver.returncode}; see '
                           f'{log.name}')
      time.sleep(0.2)
    first_step = time.monotonic() - start
    time.sleep(_WARMUP.value + _SECONDS.value)
    lines = _progress(logdir)
    first = next(x for x in lines if x[1] > 0)
    window = [x for x in lines if x[0] >= first[0] + _WARMUP.value]
    rate = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
    return first_step, rate
  finally:
    driver.send_signal(signal.SIGINT)
    try:
      driver.wait(timeout=120)
    except subprocess.TimeoutExpired:
      driver.kill()


def main(argv: List[str]) -> None:
  del argv
  reason = netns.unavailable()
  if reason:
    sys.exit(f'cluster_hosts: {reason}.')
  load = os.getloadavg()
  began = time.monotonic()
  with hosts.Cluster.start(3, cpus_per_host=1, head_cpus=0) as cluster:
    cluster_start = time.monotonic() - began
    root = tempfile.mkdtemp(prefix='cluster_hosts-')
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f'{os.cpu_count()} cores, load average at the start '
          f'{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; cluster of 3 hosts '
          f'up in {cluster_start:.1f} s; runs in {root}'
          f"{'' if _KEEP.value else ' (removed at the end)'}", flush=True)
    print('| agent | start-up, 3 hosts (s) | steps/s across hosts | '
          'steps/s on one host | hop per actor step (ms) |')
    print('|---|---|---|---|---|')
    for agent in _AGENTS.value:
      startup, across = measure(cluster, agent, 'actor=cpu:1', root)
      _, local = measure(cluster, agent, 'actor=host1:1', root)
      # Each actor steps envs_per_actor environments per call.
      calls = _NUM_ACTORS.value * _ENVS.value
      hop_ms = 1000.0 * (calls / across - calls / local)
      print(f'| {agent} | {startup:.1f} | {across:.0f} | {local:.0f} | '
            f'{hop_ms:.2f} |', flush=True)
    if not _KEEP.value:
      shutil.rmtree(root, ignore_errors=True)
  after = os.getloadavg()
  print(f'load average at the end {after[0]:.2f} {after[1]:.2f} '
        f'{after[2]:.2f}')


if __name__ == '__main__':
  app.run(main)
