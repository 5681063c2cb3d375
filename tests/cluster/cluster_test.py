"""IMPALA on a Ray cluster of three hosts in network namespaces (root only).

One test, one cluster (`repertory.cluster.hosts`), started as docs/launch.md's
cluster recipe says: the learner, replay, counter and monitor on host 1 (the
head), one actor on each of hosts 2 and 3. It checks that the actors reach
the learner's channel, Reverb and the counter's Ray actor across hosts,
records what listens on which address of each host, that a host without the
token is refused while the run goes on, that the run survives host 3's death
and that host 3, started again, takes its actor back; and that closing the
cluster leaves no process, namespace or file behind.
"""

import json
import os
import re
import signal
import subprocess
import sys
from typing import Dict

import pytest

from repertory import testing
from repertory.cluster import hosts
from repertory.cluster import netns

_UNAVAILABLE = netns.unavailable()
pytestmark = pytest.mark.skipif(
    _UNAVAILABLE is not None,
    reason=f'a cluster of hosts in network namespaces: {_UNAVAILABLE}')

# Everything but the actors on host 1; the actors ask for a CPU, which only
# hosts 2 and 3 have (the head starts with --num-cpus=0).
RESOURCES = ('learner=host1:1 replay=host1:1 counter=host1:1 '
             'monitor=host1:1 actor=cpu:1')
_PROGRESS = re.compile(r'actor_steps=(\d+) .* learner_steps=(\d+)')


def run_argv(logdir: str, address: str, *extra: str):
  return [sys.executable, '-m', 'repertory.run', '--agent=impala',
          '--env=catch', '--num_actors=2', '--envs_per_actor=4',
          '--lp_launch_type=ray', f'--ray_address={address}',
          f'--lp_resources={RESOURCES}', f'--logdir={logdir}',
          '--max_actor_steps=1000000000', '--stop_at_return=never',
          '--eval_every_steps=0', '--progress_every_seconds=1',
          '--lp_termination_notice_secs=15', *extra]


def progress(logdir: str):
  """(actor steps, learner steps) of the run's last progress line."""
  try:
    with open(os.path.join(logdir, 'progress.log')) as f:
      found = _PROGRESS.findall(f.read())
  except FileNotFoundError:
    return (0, 0)
  return tuple(map(int, found[-1])) if found else (0, 0)


def units_by_host(cluster: hosts.Cluster,
                  nodes_dir: str) -> Dict[int, Dict[int, str]]:
  """Per host, the program's processes: pid -> unit (the node log the
  process writes its stdout to)."""
  found = {}
  for index in cluster.network.hosts:
    found[index] = {}
    for pid in cluster.network.pids(index):
      try:
        target = os.readlink(f'/proc/{pid}/fd/1')
      except OSError:
        continue
      if os.path.dirname(target) == nodes_dir and target.endswith('.log'):
        found[index][pid] = os.path.basename(target)[:-len('.log')]
  return found


def identities(pids):
  """(pid, start time) of each process still there (not a zombie)."""
  found = set()
  for pid in pids:
    try:
      with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    except OSError:
      continue
    if fields[0] != 'Z':
      found.add((pid, fields[19]))
  return found


def host_of(placement, unit: str) -> int:
  hosts_found = [i for i, units in placement.items()
                 if unit in units.values()]
  assert len(hosts_found) == 1, (unit, placement)
  return hosts_found[0]


def wait_for_steps(logdir: str, driver, at_least, what: str,
                   timeout: float = 240.0):
  def check():
    assert driver.poll() is None, f'the run ended ({driver.returncode})'
    steps = progress(logdir)
    return steps if all(s >= m for s, m in zip(steps, at_least)) else None
  return testing.wait_until(check, what, timeout=timeout, interval=0.5)


def wait_for_lost_line(driver_log, label: str, address: str) -> str:
  """The launcher's line saying that a unit of group `label` was lost with
  its host `address` (and restarted)."""
  needle = f'on host {address} died'
  def line():
    return next((l for l in driver_log.read_text().splitlines()
                 if needle in l and f'unit {label}/' in l), None)
  found = testing.wait_until(line, f'a line about {label} with {needle!r}',
                             timeout=60, interval=0.5)
  print(f'The launcher said: {found}')
  return found


# Ray's worker processes serve calls on ports in this range (`ray start`'s
# --min-worker-port / --max-worker-port defaults); channels and Reverb pick
# theirs among the system's ephemeral ports.
RAY_WORKER_PORTS = range(10002, 20000)


def connections_to_host1(cluster, placement, index: int):
  """(unit, kind) of each connection of host `index`'s program processes
  to a listener at host 1's address; kind 'ray' for a Ray worker's port,
  'direct' for another (a channel, Reverb); unit None for a listener that
  no unit of host 1 owns."""
  listening = {s['port']: placement[1].get(s['pid'])
               for s in cluster.network.sockets(1)
               if s['address'].removeprefix('::ffff:') in (
                   cluster.head_ip, '*', '0.0.0.0', '::')}
  own_ports = {s['port'] for s in cluster.network.sockets(index)}
  reached = set()
  for conn in cluster.network.sockets(index, listening=False):
    address, _, port = conn['peer'].rpartition(':')
    if (conn['pid'] in placement[index] and
        conn['port'] not in own_ports and  # Not a call from host 1.
        address.removeprefix('::ffff:') == cluster.head_ip):
      kind = 'ray' if int(port) in RAY_WORKER_PORTS else 'direct'
      reached.add((listening.get(int(port), f'port {port}'), kind))
  return reached


def check_cross_host_connections(
    cluster, placement,
    direct=(('learner_0', 'direct'), ('replay_0', 'direct'))) -> None:
  """Each actor's process connects, at host 1's address, to the units
  `direct` names (by default the learner's channel, for weights, and the
  replay's Reverb server), and to a Ray worker of host 1 (handle calls,
  e.g. to the monitor or counter). Connections come and go: they are
  gathered over a few seconds."""
  for index in (2, 3):
    reached = set()
    def all_seen():
      reached.update(connections_to_host1(cluster, placement, index))
      return set(direct) <= reached and any(
          kind == 'ray' and unit in placement[1].values()
          for unit, kind in reached)
    try:
      testing.wait_until(all_seen, f'host {index} to reach {direct}',
                         timeout=30, interval=0.5)
    finally:
      print(f'host {index} actor connects to host 1: '
            f'{sorted(reached, key=str)}')


def check_listeners(cluster, placement) -> None:
  """Every listener of every host is on loopback, the host's own cluster
  address or a wildcard (which, in a host's namespace, means those two)."""
  for index, sockets in cluster.listeners().items():
    own = cluster.network.hosts[index].address
    print(f'host {index} ({own}) listens on: ' + ', '.join(
        sorted(f"{s['address']}:{s['port']} "
               f"({placement[index].get(s['pid'], s['process'])})"
               for s in sockets)))
    for s in sockets:
      address = s['address'].removeprefix('::ffff:')
      assert address in ('*', '0.0.0.0', '::', '127.0.0.1', '::1', own), (
          index, s)


@pytest.mark.timeout(900)
def test_impala_across_three_hosts_survives_a_lost_host(tmp_path):
  logdir = str(tmp_path / 'run')
  nodes_dir = os.path.join(logdir, 'nodes')
  seen_pids = set()
  with hosts.Cluster.start(3, cpus_per_host=1, head_cpus=0) as cluster:
    name = cluster.name
    ips = [h.address for h in cluster.network.hosts.values()]
    assert cluster.alive_ips() == sorted(ips)
    with open(tmp_path / 'driver.log', 'w') as log:
      driver = cluster.popen(1, run_argv(logdir, cluster.address),
                             stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=testing.like_a_shell)
    try:
      wait_for_steps(logdir, driver, (1, 1), 'actor and learner steps')
      placement = units_by_host(cluster, nodes_dir)
      for unit in ('learner_0', 'replay_0', 'counter_0', 'monitor_0'):
        assert host_of(placement, unit) == 1, placement
      assert {host_of(placement, 'actor_0'),
              host_of(placement, 'actor_1')} == {2, 3}, placement
      check_cross_host_connections(cluster, placement)
      check_listeners(cluster, placement)
      seen_pids.update(identities(p for i in cluster.network.hosts
                                  for p in cluster.network.pids(i)))

      # A host without the token cannot join; the run goes on.
      stranger = cluster.add_host(token=False)
      try:
        attempt = cluster.run(stranger, cluster.ray_start_argv(stranger),
                              token=False, check=False, timeout=90)
        said = attempt.stdout + attempt.stderr
        assert attempt.returncode != 0, said
      except subprocess.TimeoutExpired:
        said = 'ray start still trying after 90 s'
      seen_pids.update(identities(cluster.network.pids(stranger)))
      cluster.network.kill_processes(stranger)
      assert cluster.alive_ips() == sorted(ips), said
      print(f'A host without the token: {said[-600:]}')

      # Host 3 dies: the run goes on with host 2's actor.
      lost_actor = placement[3][min(placement[3])]
      steps = progress(logdir)
      cluster.kill_host(3)
      wait_for_steps(logdir, driver, (steps[0] + 2000, steps[1] + 2),
                     'steps after host 3 died')
      testing.wait_until(lambda: cluster.alive_ips() == sorted(ips[:2]),
                         'Ray to see host 3 dead', timeout=120)
      wait_for_lost_line(tmp_path / 'driver.log', 'actor', ips[2])
      # Host 3 back: its actor is started there again.
      cluster.start_ray(3)
      testing.wait_until(
          lambda: lost_actor in units_by_host(cluster, nodes_dir)[3].values(),
          f'{lost_actor} back on host 3', timeout=240)
      seen_pids.update(identities(cluster.network.pids(3)))
      steps = progress(logdir)
      wait_for_steps(logdir, driver, (steps[0] + 2000, steps[1] + 2),
                     'steps after host 3 came back')
      driver.send_signal(signal.SIGINT)
      assert driver.wait(timeout=120) == 130
    finally:
      if driver.poll() is None:
        driver.kill()
    with open(os.path.join(logdir, 'counts.json')) as f:
      counts = json.load(f)
    assert counts['actor_steps'] >= steps[0], counts
  # Nothing left: no process, namespace or file of the cluster.
  left = seen_pids & identities(p for p, _ in seen_pids)
  assert not left, left
  namespaces = subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                              text=True, check=True).stdout
  assert name not in namespaces
  assert not os.path.exists(os.path.join(netns.STATE_ROOT, name))
