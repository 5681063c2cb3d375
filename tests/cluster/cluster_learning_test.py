"""Learning across three hosts in network namespaces (root only; slow).

IMPALA and SEED learn catch with the learner (SEED's inference server in its
process) and its companions on host 1 and an actor on each of hosts 2 and 3,
run from host 1 as docs/launch.md says. While they learn, the test checks
where each unit runs, that the actors reach host 1's units across hosts
(the learner's authenticated channel, IMPALA's Reverb server, Ray handle
calls) and records what listens on which address of each host: only
loopback and each host's own cluster address. The learner's host lost, and
a worker host's link down: cluster_faults_test.py.
"""

import json
import os
import subprocess
import sys
import time

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


base = testing.import_script(
    os.path.join(os.path.dirname(os.path.abspath(__file__)),
                 'cluster_test.py'), 'repertory_cluster_test_helpers')

# What an actor of each agent calls directly at host 1 (besides Ray): an
# IMPALA actor fetches weights from the learner's channel and writes to
# Reverb; a SEED actor calls the inference server (in the learner's
# process), which writes to Reverb on its own host.
DIRECT = {'impala': (('learner_0', 'direct'), ('replay_0', 'direct')),
          'seed': (('learner_0', 'direct'),)}


def run_argv(agent: str, logdir: str, address: str, resources: str,
             *extra: str):
  return [sys.executable, '-m', 'repertory.run', f'--agent={agent}',
          '--env=catch', '--num_actors=2', '--lp_launch_type=ray',
          f'--ray_address={address}', f'--lp_resources={resources}',
          f'--logdir={logdir}', *extra]


def gather(cluster, driver, logdir: str, timeout: float = 900.0):
  """Until the run ends: the program's units per host (pid -> unit), and
  the (unit, kind) each actor host connects to on host 1; the listeners
  of every host are checked once the learner is up."""
  nodes_dir = os.path.join(logdir, 'nodes')
  placement = {i: {} for i in cluster.network.hosts}
  reached = {2: set(), 3: set()}
  listeners_checked = False
  deadline = time.monotonic() + timeout
  while driver.poll() is None and time.monotonic() < deadline:
    for index, units in base.units_by_host(cluster, nodes_dir).items():
      placement[index].update(units)
    if all(placement.values()):
      for index in reached:
        reached[index] |= base.connections_to_host1(cluster, placement, index)
      if not listeners_checked and 'learner_0' in placement[1].values():
        base.check_listeners(cluster, placement)
        listeners_checked = True
    time.sleep(0.2)
  assert listeners_checked, placement
  return placement, reached


@pytest.mark.timeout(1200)
@pytest.mark.parametrize('agent', ['impala', 'seed'])
def test_learns_catch_across_hosts(agent, tmp_path):
  logdir = str(tmp_path / 'run')
  with hosts.Cluster.start(3, cpus_per_host=1, head_cpus=0) as cluster:
    argv = run_argv(agent, logdir, cluster.address,
                    f'learner=host1:1 {_HOST1} actor=cpu:1')
    with open(tmp_path / 'driver.log', 'w') as log:
      driver = cluster.popen(1, argv, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=testing.like_a_shell)
    try:
      # Catch may be learnt within seconds of the first step: where units
      # run, what they connect to and what listens are gathered from the
      # run's start to its end.
      placement, reached = gather(cluster, driver, logdir)
      returncode = driver.wait(timeout=60)
    finally:
      if driver.poll() is None:
        driver.kill()
  print(f'{agent} units per host: ' + str(
      {i: sorted(set(units.values())) for i, units in placement.items()}))
  for unit in ('learner_0', 'replay_0', 'counter_0', 'monitor_0'):
    assert base.host_of(placement, unit) == 1, placement
  assert {base.host_of(placement, 'actor_0'),
          base.host_of(placement, 'actor_1')} == {2, 3}, placement
  for index in (2, 3):
    print(f'host {index} actor connects to host 1: '
          f'{sorted(reached[index], key=str)}')
    assert set(DIRECT[agent]) <= reached[index], (index, reached)
    assert any(kind == 'ray' and unit in placement[1].values()
               for unit, kind in reached[index]), (index, reached)
  output = (tmp_path / 'driver.log').read_text()
  assert returncode == 0, output[-3000:]
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  print(f'{agent} results: {results}')
  # Stopped by two greedy evaluations of 0.95, before the 1M-step budget.
  assert results['actor_steps'] < 1_000_000, results
  assert results['eval_return_mean'] >= 0.8, results
