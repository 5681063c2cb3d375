"""Hosts lost under a running program, on three hosts in network namespaces
(root only; slow).

- A worker host's link goes down (`ip link set ... down` on its port of the
  bridge; its processes keep running, cut off): the run goes on with the
  other host's actor, no learner checkpoint is lost, and once the link is up
  again and the host runs `ray start` again, its actor is started there.
- The learner's host is lost (every process on it killed): the run stops
  with one line naming the lost unit and its host, and the same command,
  once the host is back, resumes from the learner's checkpoint.

Host 3 killed outright, and a host without the token, are in
cluster_test.py (the default suite).
"""

import json
import os
import re
import signal
import subprocess

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

base = testing.import_script(
    os.path.join(os.path.dirname(os.path.abspath(__file__)),
                 'cluster_test.py'), 'repertory_cluster_test_helpers')

_CKPT = re.compile(r'ckpt-(\d+)\.index$')


def checkpoint_versions(logdir: str):
  """The versions of the learner's checkpoints on disk."""
  directory = os.path.join(logdir, 'checkpoints', 'latest')
  try:
    names = os.listdir(directory)
  except FileNotFoundError:
    return []
  return sorted(int(m.group(1)) for m in map(_CKPT.search, names) if m)


def raylets(cluster: hosts.Cluster, index: int):
  """The raylet processes on host `index`."""
  found = []
  for pid in cluster.network.pids(index):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        argv0 = f.read().split(b'\0')[0]
    except OSError:
      continue
    if os.path.basename(argv0) == b'raylet':
      found.append(pid)
  return found


@pytest.mark.timeout(1200)
def test_worker_host_link_down_then_back(tmp_path):
  logdir = str(tmp_path / 'run')
  nodes_dir = os.path.join(logdir, 'nodes')
  with hosts.Cluster.start(3, cpus_per_host=1, head_cpus=0) as cluster:
    ips = [h.address for h in cluster.network.hosts.values()]
    argv = base.run_argv(logdir, cluster.address,
                         '--config.checkpoint.every_steps=20')
    with open(tmp_path / 'driver.log', 'w') as log:
      driver = cluster.popen(1, argv, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=testing.like_a_shell)
    try:
      base.wait_for_steps(logdir, driver, (1, 1), 'actor and learner steps')
      placement = base.units_by_host(cluster, nodes_dir)
      assert base.host_of(placement, 'learner_0') == 1, placement
      lost_actor = placement[3][min(placement[3])]
      testing.wait_until(lambda: checkpoint_versions(logdir),
                         'a learner checkpoint', timeout=240)

      # Host 3's cable pulled: its processes live on, cut off.
      cluster.set_link(3, up=False)
      versions = checkpoint_versions(logdir)
      steps = base.progress(logdir)
      base.wait_for_steps(logdir, driver, (steps[0] + 2000, steps[1] + 2),
                          'steps with host 3 cut off')
      testing.wait_until(lambda: cluster.alive_ips() == sorted(ips[:2]),
                         'Ray to see host 3 dead', timeout=180)
      base.wait_for_lost_line(tmp_path / 'driver.log', 'actor', ips[2])
      steps = base.progress(logdir)
      base.wait_for_steps(logdir, driver, (steps[0] + 2000, steps[1] + 2),
                          'steps after Ray saw host 3 dead')
      assert max(checkpoint_versions(logdir)) >= max(versions)

      # The cable back: host 3's raylet learns it was declared dead and
      # exits, and the program's processes there with it; `ray start` on
      # host 3 joins it again and its actor returns.
      cluster.set_link(3, up=True)
      testing.wait_until(lambda: not raylets(cluster, 3),
                         "host 3's old raylet to exit", timeout=120)
      testing.wait_until(
          lambda: not base.units_by_host(cluster, nodes_dir)[3],
          "the program's processes on host 3 to end", timeout=60)
      cluster.start_ray(3)
      cluster.wait_for_nodes(3)
      testing.wait_until(
          lambda: lost_actor in base.units_by_host(
              cluster, nodes_dir)[3].values(),
          f'{lost_actor} back on host 3', timeout=240)
      steps = base.progress(logdir)
      base.wait_for_steps(logdir, driver, (steps[0] + 2000, steps[1] + 2),
                          'steps after host 3 came back')
      driver.send_signal(signal.SIGINT)
      assert driver.wait(timeout=120) == 130
    finally:
      if driver.poll() is None:
        driver.kill()
  # No checkpoint lost: the final one is newer than any before the cut.
  final = checkpoint_versions(logdir)
  assert final and max(final) > max(versions), (final, versions)
  with open(os.path.join(logdir, 'counts.json')) as f:
    counts = json.load(f)
  assert counts['actor_steps'] >= steps[0], counts


@pytest.mark.timeout(1200)
def test_learner_host_lost_then_resumed(tmp_path):
  logdir = str(tmp_path / 'run')
  with hosts.Cluster.start(3, cpus_per_host=1, head_cpus=0) as cluster:
    argv = base.run_argv(logdir, cluster.address,
                         '--config.checkpoint.every_steps=20')
    argv = [a for a in argv if not a.startswith('--lp_resources=')] + [
        '--lp_resources=learner=host2:1 replay=host1:1 counter=host1:1 '
        'monitor=host1:1 actor=host3:1']
    with open(tmp_path / 'driver.log', 'w') as log:
      driver = cluster.popen(1, argv, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=testing.like_a_shell)
    try:
      testing.wait_until(lambda: checkpoint_versions(logdir),
                         'a learner checkpoint', timeout=300)
      cluster.kill_host(2)
      assert driver.wait(timeout=180) == 1
    finally:
      if driver.poll() is None:
        driver.kill()
    output = (tmp_path / 'driver.log').read_text()
    errors = [l for l in output.splitlines()
              if l.startswith('repertory.run: error:')]
    print('\n'.join(errors))
    # One line naming the lost unit and its host.
    assert len(errors) == 1, output[-3000:]
    assert "node 'learner/0'" in errors[0], errors
    assert f'host {cluster.network.hosts[2].address}' in errors[0], errors
    saved = max(checkpoint_versions(logdir))

    cluster.start_ray(2)
    cluster.wait_for_nodes(3)
    with open(tmp_path / 'driver2.log', 'w') as log:
      driver = cluster.popen(1, argv, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=testing.like_a_shell)
    try:
      output2 = tmp_path / 'driver2.log'
      testing.wait_until(lambda: 'Resumed at' in output2.read_text(),
                         'the rerun to resume', timeout=120)
      testing.wait_until(
          lambda: max(checkpoint_versions(logdir)) > saved,
          'a checkpoint newer than the one resumed from', timeout=300)
      learner_log = os.path.join(logdir, 'nodes', 'learner_0.log')
      with open(learner_log) as f:
        assert f'Resumed at version {saved},' in f.read()
    finally:
      driver.send_signal(signal.SIGINT)
      try:
        driver.wait(timeout=120)
      except subprocess.TimeoutExpired:
        driver.kill()
