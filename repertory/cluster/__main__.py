"""Starts or ends a Ray cluster of hosts in network namespaces (root).

    python -m repertory.cluster up --hosts=3   # prints the head and a launch
    python -m repertory.cluster list
    python -m repertory.cluster down [<name>]  # every cluster if no name

See docs/launch.md, "A cluster on one machine".
"""

import shlex
import sys
from typing import List

from absl import app
from absl import flags

from repertory.cluster import hosts
from repertory.cluster import netns

COMMANDS = ('up', 'down', 'list')

_HOSTS = flags.DEFINE_integer('hosts', 3, 'up: hosts, host 1 the head.')
_CPUS = flags.DEFINE_float('cpus_per_host', 1,
                           "up: `ray start --num-cpus` of hosts 2..N.")
_HEAD_CPUS = flags.DEFINE_float(
    'head_cpus', 0, "up: host 1's `--num-cpus` (0: groups that ask for a "
    'CPU, e.g. actor=cpu:1, run on the other hosts).')
_SUBNET = flags.DEFINE_string(
    'subnet', None, 'up: the cluster network, e.g. 10.77.0.0/24 (default: '
    'the first free /24 of 10.77.0.0/16).')

# What `up` suggests: the learner and the nodes it works with on host 1,
# the actors wherever a CPU is free (hosts 2..N with --head_cpus=0).
EXAMPLE_RESOURCES = ('learner=host1:1 replay=host1:1 counter=host1:1 '
                     'monitor=host1:1 evaluator=host1:1 actor=cpu:1')


def launch_command(cluster: hosts.Cluster) -> str:
  """The command line that runs IMPALA across `cluster` from host 1."""
  argv = cluster.command(1, [
      'python', '-m', 'repertory.run', '--agent=impala', '--env=catch',
      '--lp_launch_type=ray', f'--ray_address={cluster.address}',
      f'--lp_resources={EXAMPLE_RESOURCES}'])
  return ' '.join(shlex.quote(a) for a in argv)


def describe(cluster: hosts.Cluster) -> List[str]:
  network = cluster.network
  lines = [f'cluster {cluster.name}: {len(network.hosts)} hosts on '
           f'{network.subnet}, Ray head at {cluster.address}']
  for index, host in sorted(network.hosts.items()):
    role = 'head' if index == 1 else 'worker'
    lines.append(f'  host {index} ({role}): {host.address}, namespace '
                 f'{host.namespace}, resource host{index}, token '
                 f'{cluster.token_path(index)}')
  return lines


def up() -> None:
  if _HOSTS.value < 1:
    raise ValueError(f'--hosts={_HOSTS.value}: a cluster needs at least 1 '
                     'host.')
  cluster = hosts.Cluster.start(_HOSTS.value, cpus_per_host=_CPUS.value,
                                head_cpus=_HEAD_CPUS.value,
                                subnet=_SUBNET.value)
  cluster.detach()
  print('\n'.join(describe(cluster)))
  print('Launch onto it from host 1:')
  print(f'  {launch_command(cluster)}')
  print(f'End it: python -m repertory.cluster down {cluster.name}')


def down(names: List[str]) -> None:
  for name in names or netns.recorded():
    hosts.Cluster.attach(name).close()
    print(f'cluster {name}: processes killed, namespaces and files removed')


def main(argv: List[str]) -> None:
  if len(argv) < 2 or argv[1] not in COMMANDS:
    given = repr(argv[1]) if len(argv) > 1 else 'none'
    sys.exit(f'repertory.cluster: error: command {given}; choose one of '
             f'{", ".join(COMMANDS)}.')
  command, rest = argv[1], argv[2:]
  if command != 'down' and rest:
    sys.exit(f'repertory.cluster: error: unexpected arguments {rest}.')
  if command != 'list':
    reason = netns.unavailable()
    if reason:
      sys.exit(f'repertory.cluster: error: {reason}.')
  try:
    if command == 'up':
      up()
    elif command == 'down':
      down(rest)
    else:
      for name in netns.recorded():
        print('\n'.join(describe(hosts.Cluster.attach(name))))
  except (ValueError, netns.NetnsError, hosts.ClusterError) as e:
    sys.exit(f'repertory.cluster: error: {e}')


if __name__ == '__main__':
  app.run(main)
