"""Learning and the learner's host lost, on three hosts in network namespaces
(root only; slow).

IMPALA and SEED learn catch with the learner (SEED's inference server in its
process) on host 1 and an actor on each of hosts 2 and 3, run from host 1 as
docs/launch.md says. Then the learner's host is lost: with the learner on
host 2 and the driver on host 1, every process of host 2 is killed; the run
stops with one line naming the lost unit, and the same command, once host 2
is back, resumes from the learner's checkpoint.
"""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from repertory import testing
from repertory.cluster import hosts
from repertory.cluster import netns

_UNAVAILABLE = netns.unavailable()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        _UNAVAILABLE is not None,
        reason=f'a cluster of hosts in network namespaces: {_UNAVAILABLE}'),
]

# The learner's companions on host 1 (the evaluator evaluates every 20,000
# actor steps by default).
_HOST1 = 'replay=host1:1 counter=host1:1 monitor=host1:1 evaluator=host1:1'


def run_argv(agent: str, logdir: str, address: str, resources: str,
             *extra: str):
  return [sys.executable, '-m', 'repertory.run', f'--agent={agent}',
          '--env=catch', '--num_actors=2', '--lp_launch_type=ray',
          f'--ray_address={address}', f'--lp_resources={resources}',
          f'--logdir={logdir}', *extra]


@pytest.mark.parametrize('agent', ['impala', 'seed'])
def test_learns_catch_across_hosts(agent, tmp_path):
  logdir = str(tmp_path / 'run')
  with hosts.Cluster.start(3, cpus_per_host=1, head_cpus=0) as cluster:
    result = cluster.run(
        1, run_argv(agent, logdir, cluster.address,
                    f'learner=host1:1 {_HOST1} actor=cpu:1'),
        timeout=900, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  # Stopped by two greedy evaluations of 0.95, before the 1M-step budget.
  assert results['actor_steps'] < 1_000_000, results
  assert results['eval_return_mean'] >= 0.8, results


def _learner_steps(logdir: str) -> int:
  try:
    with open(os.path.join(logdir, 'progress.log')) as f:
      found = re.findall(r'learner_steps=(\d+)', f.read())
  except FileNotFoundError:
    return 0
  return int(found[-1]) if found else 0


def test_learner_host_lost_then_resumed(tmp_path):
  logdir = str(tmp_path / 'run')
  checkpoints = os.path.join(logdir, 'checkpoints')
  with hosts.Cluster.start(3, cpus_per_host=1, head_cpus=0) as cluster:
    argv = run_argv(
        'impala', logdir, cluster.address,
        'learner=host2:1 replay=host1:1 counter=host1:1 monitor=host1:1 '
        'actor=host3:1', '--max_actor_steps=1000000000',
        '--stop_at_return=never', '--eval_every_steps=0',
        '--progress_every_seconds=1', '--config.checkpoint_every_steps=20')
    with open(tmp_path / 'driver.log', 'w') as log:
      driver = cluster.popen(1, argv, stdout=log, stderr=subprocess.STDOUT)
    try:
      testing.wait_until(
          lambda: os.path.isdir(checkpoints) and os.listdir(checkpoints),
          'a learner checkpoint', timeout=300)
      cluster.kill_host(2)
      assert driver.wait(timeout=180) == 1
    finally:
      if driver.poll() is None:
        driver.kill()
    output = (tmp_path / 'driver.log').read_text()
    errors = [l for l in output.splitlines()
              if l.startswith('repertory.run: error:')]
    assert len(errors) == 1 and 'learner' in errors[0], output[-3000:]
    steps_before = _learner_steps(logdir)

    cluster.start_ray(2)
    cluster.wait_for_nodes(3)
    with open(tmp_path / 'driver2.log', 'w') as log:
      driver = cluster.popen(1, argv, stdout=log, stderr=subprocess.STDOUT)
    try:
      output2 = tmp_path / 'driver2.log'
      testing.wait_until(lambda: 'resuming' in output2.read_text(),
                         'the rerun to resume', timeout=120)
      testing.wait_until(
          lambda: _learner_steps(logdir) > steps_before,
          'learner steps after the resume', timeout=300)
    finally:
      driver.send_signal(signal.SIGINT)
      try:
        driver.wait(timeout=120)
      except subprocess.TimeoutExpired:
        driver.kill()
