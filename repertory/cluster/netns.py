"""Hosts as Linux network namespaces on a private bridge.

A `Network` of N hosts is N + 1 network namespaces: one per host, with its
own loopback, one link (`eth0`) and one address, and a switch namespace
holding the bridge every host's link plugs into. The switch namespace has no
address and no link to the machine's own network stack, so nothing a host
serves is reachable from the machine's other interfaces, and a host's
default route leads only into the cluster network (which is also how Ray
finds a host's address: the route its packets would take outward).

    network = netns.Network.create(3)   # hosts 1..3 at 10.77.0.1..3
    subprocess.run(network.exec_argv(2, ['ss', '-ltn']))
    network.set_link(2, up=False)       # host 2's cable pulled at the switch
    network.destroy()                   # its processes killed, all removed

Creating namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and
iproute2; `unavailable()` says why they cannot be used here.
"""

import dataclasses
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import time
from typing import Any, Dict, List, Optional, Sequence

# Subnets tried, in order, for a new network: the first /24 of 10.77.0.0/16
# that no interface or route of this machine, and no other cluster of this
# module, uses.
SUBNET_POOL = ipaddress.ip_network('10.77.0.0/16')
# Where each network records itself (`repertory.cluster down` reads it).
STATE_ROOT = '/tmp/repertory-clusters'
# In a network's state directory: the process id that removes it at exit.
OWNER_FILE = 'owner'


class NetnsError(RuntimeError):
  """A namespace, link or address could not be made or removed."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
  result = subprocess.run(['ip', *args], capture_output=True, text=True,
                          check=False)
  if check and result.returncode != 0:
    raise NetnsError(f"`ip {' '.join(args)}` failed: "
                     f'{result.stderr.strip() or result.returncode}')
  return result


def unavailable() -> Optional[str]:
  """Why hosts in network namespaces cannot be made here, or None."""
  if os.geteuid() != 0:
    return ('network namespaces need root (ip netns add); run as root to '
            'start a cluster of hosts on this machine')
  if shutil.which('ip') is None:
    return 'iproute2 (the `ip` command) is not installed'
  probe = f'rcprobe{os.getpid()}'
  result = _ip('netns', 'add', probe, check=False)
  if result.returncode != 0:
    return f'`ip netns add` fails here: {result.stderr.strip()}'
  _ip('netns', 'del', probe, check=False)
  return None


def _used_networks() -> List[ipaddress.IPv4Network]:
  """The IPv4 networks of this machine's interfaces and routes, and of the
  clusters recorded under STATE_ROOT."""
  used = []
  for args in (('-o', '-4', 'addr', 'show'), ('-4', 'route', 'show')):
    for line in _ip(*args, check=False).stdout.splitlines():
      for word in line.split():
        try:
          used.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
          continue
  if os.path.isdir(STATE_ROOT):
    for name in os.listdir(STATE_ROOT):
      path = os.path.join(STATE_ROOT, name, 'subnet')
      try:
        with open(path) as f:
          used.append(ipaddress.ip_network(f.read().strip()))
      except (OSError, ValueError):
        continue
  return [n for n in used if n.version == 4 and n.prefixlen > 0]


def free_subnet() -> ipaddress.IPv4Network:
  """The first /24 of SUBNET_POOL that overlaps nothing in use."""
  used = _used_networks()
  for subnet in SUBNET_POOL.subnets(new_prefix=24):
    if not any(subnet.overlaps(u) for u in used):
      return subnet
  raise NetnsError(f'No free /24 in {SUBNET_POOL} for a cluster network.')


def recorded() -> List[str]:
  """The names of the networks recorded under STATE_ROOT."""
  if not os.path.isdir(STATE_ROOT):
    return []
  return sorted(n for n in os.listdir(STATE_ROOT)
                if os.path.exists(os.path.join(STATE_ROOT, n, 'subnet')))


def reap_orphans() -> List[str]:
  """Destroys the recorded networks whose owning process is gone (killed
  before it could clean up); returns their names. A network `disown`ed
  (e.g. by `repertory.cluster up`) has no owner and is kept."""
  reaped = []
  for name in recorded():
    try:
      with open(os.path.join(STATE_ROOT, name, OWNER_FILE)) as f:
        pid = int(f.read().strip())
    except (OSError, ValueError):
      continue
    try:
      os.kill(pid, 0)
      continue  # Its owner is alive.
    except ProcessLookupError:
      pass
    except PermissionError:
      continue
    Network.load(name).destroy()
    reaped.append(name)
  return reaped


@dataclasses.dataclass
class Host:
  """One host: its namespace, address and its port on the switch."""
  index: int          # 1-based
  namespace: str
  address: str
  switch_port: str    # the veth end on the bridge, in the switch namespace


class Network:
  """N hosts (namespaces) on one bridge; see the module docstring."""

  def __init__(self, name: str, subnet: ipaddress.IPv4Network,
               state_dir: str):
    self.name = name
    self.subnet = subnet
    self.state_dir = state_dir
    self.switch = f'{name}-sw'
    self.hosts: Dict[int, Host] = {}

  @classmethod
  def create(cls, num_hosts: int,
             subnet: Optional[str] = None) -> 'Network':
    """Makes the switch and hosts 1..num_hosts; on failure removes what it
    made and raises NetnsError."""
    if num_hosts < 1:
      raise ValueError(f'num_hosts={num_hosts} must be at least 1.')
    try:
      net = ipaddress.IPv4Network(subnet) if subnet else None
    except ValueError:
      raise ValueError(f'subnet={subnet!r} is not an IPv4 network such as '
                       '10.77.0.0/24.') from None
    if net is not None and net.num_addresses < num_hosts + 2:
      raise ValueError(f'subnet={subnet!r} has no room for {num_hosts} '
                       'hosts; give an IPv4 network such as 10.77.0.0/24.')
    reason = unavailable()
    if reason:
      raise NetnsError(f'Cannot make hosts in network namespaces: {reason}.')
    reap_orphans()
    name = f'rc{secrets.token_hex(3)}'
    state_dir = os.path.join(STATE_ROOT, name)
    os.makedirs(state_dir, mode=0o700)
    with open(os.path.join(state_dir, OWNER_FILE), 'w') as f:
      f.write(str(os.getpid()))
    net = net or free_subnet()
    with open(os.path.join(state_dir, 'subnet'), 'w') as f:
      f.write(str(net))
    network = cls(name, net, state_dir)
    try:
      _ip('netns', 'add', network.switch)
      _ip('-n', network.switch, 'link', 'add', 'br0', 'type', 'bridge')
      _ip('-n', network.switch, 'link', 'set', 'br0', 'up')
      for _ in range(num_hosts):
        network.add_host()
    except BaseException:
      network.destroy()
      raise
    return network

  @classmethod
  def load(cls, name: str) -> 'Network':
    """The network `name` that `create` recorded (e.g. by another
    process), with the hosts whose namespaces exist."""
    state_dir = os.path.join(STATE_ROOT, name)
    try:
      with open(os.path.join(state_dir, 'subnet')) as f:
        subnet = ipaddress.ip_network(f.read().strip())
    except (OSError, ValueError):
      raise NetnsError(f'No cluster network {name!r}; recorded ones: '
                       f'{recorded() or "none"}.') from None
    network = cls(name, subnet, state_dir)
    for line in _ip('netns', 'list', check=False).stdout.splitlines():
      namespace = line.split()[0] if line.split() else ''
      suffix = namespace[len(name) + 2:]
      if namespace.startswith(f'{name}-h') and suffix.isdigit():
        index = int(suffix)
        network.hosts[index] = Host(index, namespace,
                                    str(subnet.network_address + index),
                                    f'p{index}')
    return network

  def add_host(self) -> Host:
    """Adds the next host (index max + 1) to the bridge."""
    index = max(self.hosts, default=0) + 1
    if index >= self.subnet.num_addresses - 1:
      raise NetnsError(f'{self.subnet} has no address for host {index}.')
    host = Host(index, f'{self.name}-h{index}',
                str(self.subnet.network_address + index), f'p{index}')
    self.hosts[index] = host
    ns, prefix = host.namespace, self.subnet.prefixlen
    _ip('netns', 'add', ns)
    _ip('-n', ns, 'link', 'set', 'lo', 'up')
    _ip('-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name',
        host.switch_port, 'netns', self.switch)
    _ip('-n', ns, 'addr', 'add', f'{host.address}/{prefix}', 'dev', 'eth0')
    _ip('-n', ns, 'link', 'set', 'eth0', 'up')
    _ip('-n', ns, 'route', 'add', 'default', 'dev', 'eth0')
    _ip('-n', self.switch, 'link', 'set', host.switch_port, 'master', 'br0')
    _ip('-n', self.switch, 'link', 'set', host.switch_port, 'up')
    return host

  def disown(self) -> None:
    """Keeps the network when the process that made it exits."""
    try:
      os.remove(os.path.join(self.state_dir, OWNER_FILE))
    except FileNotFoundError:
      pass

  def exec_argv(self, index: int, argv: Sequence[str]) -> List[str]:
    """`argv` run inside host `index`'s namespace."""
    return ['ip', 'netns', 'exec', self.hosts[index].namespace, *argv]

  def set_link(self, index: int, up: bool) -> None:
    """Plugs host `index`'s link into the switch, or pulls it out."""
    _ip('-n', self.switch, 'link', 'set', self.hosts[index].switch_port,
        'up' if up else 'down')

  def pids(self, index: int) -> List[int]:
    """The processes in host `index`'s namespace."""
    out = _ip('netns', 'pids', self.hosts[index].namespace,
              check=False).stdout
    return [int(p) for p in out.split()]

  def kill_processes(self, index: int, grace: float = 3.0) -> None:
    """Ends every process in host `index`'s namespace: SIGTERM, then
    SIGKILL to those left after `grace` seconds (at once if 0)."""
    steps = [(signal.SIGTERM, grace)] if grace > 0 else []
    for sig, wait in steps + [(signal.SIGKILL, 10.0)]:
      for pid in self.pids(index):
        try:
          os.kill(pid, sig)
        except ProcessLookupError:
          pass
      deadline = time.monotonic() + wait
      while self.pids(index) and time.monotonic() < deadline:
        time.sleep(0.1)
      if not self.pids(index):
        return
    raise NetnsError(f'Processes {self.pids(index)} in '
                     f'{self.hosts[index].namespace} survived SIGKILL.')

  def sockets(self, index: int,
              listening: bool = True) -> List[Dict[str, Any]]:
    """Host `index`'s TCP sockets (`ss -tnp` in its namespace): listening
    ones, or established connections. Each: address, port, peer (for
    connections, 'address:port'), pid and process name."""
    state = ['-l'] if listening else ['state', 'established']
    out = subprocess.run(self.exec_argv(index, ['ss', '-tnpH', *state]),
                         capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
      fields = line.split()
      # Listening: State Recv-Q Send-Q Local Peer [Process]; with a state
      # filter ss leaves State out.
      fields = fields[1:] if listening else fields
      if len(fields) < 4:
        continue
      address, _, port = fields[2].rpartition(':')
      process, pid = '', 0
      if len(fields) > 4 and 'pid=' in fields[4]:
        process = fields[4].split('"')[1]
        pid = int(fields[4].split('pid=')[1].split(',')[0])
      found.append({'address': address.strip('[]'), 'port': int(port),
                    'peer': fields[3].replace('[', '').replace(']', ''),
                    'pid': pid, 'process': process})
    return found

  def destroy(self) -> None:
    """Kills every process in the hosts' namespaces and removes the
    namespaces (their links go with them) and the state directory."""
    errors = []
    for index in sorted(self.hosts):
      try:
        self.kill_processes(index)
      except NetnsError as e:
        errors.append(str(e))
      _ip('netns', 'del', self.hosts[index].namespace, check=False)
    _ip('netns', 'del', self.switch, check=False)
    shutil.rmtree(self.state_dir, ignore_errors=True)
    if errors:
      raise NetnsError('; '.join(errors))
