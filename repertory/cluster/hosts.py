"""A Ray cluster with token authentication, one Ray node per host.

`Cluster.start(3)` makes three hosts in network namespaces (`netns`) and
starts Ray on them as the cluster recipe of docs/launch.md says:

    ray get-auth-token --generate      # host 1, then the token copied to all
    RAY_AUTH_MODE=token ray start --head --port=6379 --include-dashboard=false
    RAY_AUTH_MODE=token ray start --address=<host 1>:6379    # hosts 2..N

Each host has a home directory of its own under the cluster's state
directory, holding its copy of the token (`~/.ray/auth_token`, mode 0600),
so the user's own ~/.ray is never read or written, and Ray's files go to a
temporary directory of its own (`--temp-dir`). Every `ray start` also gets
`--num-cpus`, a custom resource naming its host (`host<i>`, so a program's
groups can be placed per host with `--lp_resources`, e.g. `learner=host1:1`)
and a small object store, so that several hosts share one machine.

`close()` (also on exit of the `with` block, and at interpreter exit if
the cluster was not closed) kills every process in the hosts' namespaces -
never `ray stop`, which would stop every Ray node of the machine - and
removes the namespaces and directories.
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from repertory.cluster import netns

RAY_PORT = 6379
# The object store of each host (Ray's minimum is 75 MiB); a program's
# nodes pass small arguments inline and replay lives in Reverb.
OBJECT_STORE_BYTES = 128 * 1024 * 1024
# How long a host's `ray start` and its registration may take on a busy
# machine.
START_TIMEOUT_S = 180.0

_NODES_SCRIPT = """
import json, sys
from ray._raylet import GcsClient
nodes = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=20).values()
print(json.dumps([{'ip': n.node_manager_address, 'alive': n.state == 0,
                   'resources': dict(n.resources_total)} for n in nodes]))
"""


class ClusterError(RuntimeError):
  """A host's Ray did not start, register or stop."""


def _bin(name: str) -> str:
  """A console script of this interpreter's environment (ray, python)."""
  return os.path.join(os.path.dirname(sys.executable), name)


class Cluster:
  """Ray on hosts 1..N of a `netns.Network`; host 1 is the head."""

  def __init__(self, network: netns.Network, cpus_per_host: float,
               head_cpus: Optional[float] = None):
    self.network = network
    self.cpus_per_host = cpus_per_host
    self.head_cpus = cpus_per_host if head_cpus is None else head_cpus
    self._closed = False

  @classmethod
  def start(cls, num_hosts: int, cpus_per_host: float = 1,
            head_cpus: Optional[float] = None,
            subnet: Optional[str] = None) -> 'Cluster':
    """Makes `num_hosts` hosts and starts the head and the workers; waits
    until every node is registered. Everything is removed if a step fails.

    Args:
      num_hosts: hosts, at least 1 (host 1 runs the head).
      cpus_per_host: `ray start --num-cpus` of hosts 2..N.
      head_cpus: host 1's, default cpus_per_host (0 keeps actors that ask
        for a CPU off the head).
      subnet: the cluster network, default the first free /24 of
        10.77.0.0/16.
    """
    network = netns.Network.create(num_hosts, subnet)
    cluster = cls(network, cpus_per_host, head_cpus)
    atexit.register(cluster.close)  # Also if the caller never closes it.
    try:
      cluster.generate_token()
      for index in sorted(network.hosts):
        cluster.start_ray(index)
      cluster.wait_for_nodes(num_hosts)
    except BaseException:
      cluster.close()
      raise
    return cluster

  # Addresses and environments.

  @property
  def name(self) -> str:
    return self.network.name

  @property
  def head_ip(self) -> str:
    return self.network.hosts[1].address

  @property
  def address(self) -> str:
    """The head's GCS, `<host 1>:6379`, as `--ray_address` takes it."""
    return f'{self.head_ip}:{RAY_PORT}'

  def home(self, index: int) -> str:
    """Host `index`'s home directory (its ~/.ray/auth_token)."""
    return os.path.join(self.network.state_dir, f'h{index}', 'home')

  def token_path(self, index: int) -> str:
    return os.path.join(self.home(index), '.ray', 'auth_token')

  def env(self, index: int, token: bool = True,
          extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of a process on host `index`: its own HOME, and
    RAY_AUTH_MODE=token unless `token` is False."""
    env = dict(os.environ)
    for key in ('RAY_ADDRESS', 'RAY_AUTH_TOKEN', 'RAY_AUTH_TOKEN_PATH',
                'RAY_AUTH_MODE'):
      env.pop(key, None)
    env['HOME'] = self.home(index)
    env['PATH'] = os.path.dirname(sys.executable) + ':' + env.get('PATH', '')
    env['RAY_USAGE_STATS_ENABLED'] = '0'
    if token:
      env['RAY_AUTH_MODE'] = 'token'
    env.update(extra or {})
    return env

  def command(self, index: int, argv: Sequence[str], token: bool = True,
              env: Optional[Mapping[str, str]] = None) -> List[str]:
    """`argv` as a command line run on host `index` (in its namespace,
    with `env(index)`): for printing, or for `subprocess`."""
    assignments = [f'{k}={v}' for k, v in
                   sorted(self.env(index, token, env).items())
                   if k in ('HOME', 'RAY_AUTH_MODE') or k in (env or {})]
    return self.network.exec_argv(index, ['env', *assignments, *argv])

  def popen(self, index: int, argv: Sequence[str], token: bool = True,
            env: Optional[Mapping[str, str]] = None,
            **kwargs: Any) -> subprocess.Popen:
    """Starts `argv` on host `index` (its namespace and environment)."""
    return subprocess.Popen(self.network.exec_argv(index, list(argv)),
                            env=self.env(index, token, env), **kwargs)

  def run(self, index: int, argv: Sequence[str], token: bool = True,
          env: Optional[Mapping[str, str]] = None, timeout: float = 120.0,
          check: bool = True) -> subprocess.CompletedProcess:
    """Runs `argv` on host `index` to its end; its output captured."""
    result = subprocess.run(self.network.exec_argv(index, list(argv)),
                            env=self.env(index, token, env),
                            capture_output=True, text=True, timeout=timeout,
                            check=False)
    if check and result.returncode != 0:
      raise ClusterError(
          f"`{' '.join(argv)}` on host {index} failed "
          f'({result.returncode}): {(result.stderr or result.stdout)[-2000:]}')
    return result

  # Ray.

  def generate_token(self) -> None:
    """`ray get-auth-token --generate` on host 1, then its token copied to
    every host's home (mode 0600)."""
    for index in self.network.hosts:
      os.makedirs(os.path.join(self.home(index), '.ray'), mode=0o700,
                  exist_ok=True)
    self.run(1, [_bin('ray'), 'get-auth-token', '--generate'])
    os.chmod(self.token_path(1), 0o600)
    for index in self.network.hosts:
      if index != 1:
        self.copy_token(index)

  def copy_token(self, index: int) -> None:
    os.makedirs(os.path.dirname(self.token_path(index)), mode=0o700,
                exist_ok=True)
    shutil.copyfile(self.token_path(1), self.token_path(index))
    os.chmod(self.token_path(index), 0o600)

  def ray_start_argv(self, index: int) -> List[str]:
    """Host `index`'s `ray start` command line."""
    argv = [_bin('ray'), 'start']
    if index == 1:
      argv += ['--head', f'--port={RAY_PORT}', '--include-dashboard=false']
    else:
      argv += [f'--address={self.address}']
    cpus = self.head_cpus if index == 1 else self.cpus_per_host
    argv += [f'--num-cpus={cpus:g}',
             f"--resources={json.dumps({f'host{index}': 1000})}",
             f'--object-store-memory={OBJECT_STORE_BYTES}',
             '--temp-dir=' + os.path.join(self.network.state_dir,
                                          f'h{index}', 'ray'),
             '--disable-usage-stats']
    return argv

  def start_ray(self, index: int, token: bool = True,
                timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess:
    """`ray start` on host `index` (the head for host 1), with
    RAY_AUTH_MODE=token unless `token` is False; raises ClusterError if it
    fails."""
    return self.run(index, self.ray_start_argv(index), token=token,
                    timeout=timeout)

  def nodes(self, via: int = 1) -> List[Dict[str, Any]]:
    """Ray's node table, asked from host `via` with its token: each node's
    ip, whether it is alive, and its resources."""
    result = self.run(via, [sys.executable, '-c', _NODES_SCRIPT,
                            self.address], timeout=60)
    return json.loads(result.stdout.strip().splitlines()[-1])

  def alive_ips(self) -> List[str]:
    return sorted(n['ip'] for n in self.nodes() if n['alive'])

  def wait_for_nodes(self, count: int,
                     timeout: float = START_TIMEOUT_S) -> List[str]:
    """Waits until `count` nodes are alive; returns their addresses."""
    deadline = time.monotonic() + timeout
    while True:
      ips = self.alive_ips()
      if len(ips) == count:
        return ips
      if time.monotonic() > deadline:
        raise ClusterError(f'{len(ips)} Ray nodes alive ({ips}) after '
                           f'{timeout:.0f} s, expected {count}.')
      time.sleep(1.0)

  # Faults.

  def kill_host(self, index: int) -> None:
    """Every process on host `index` killed (the machine died)."""
    self.network.kill_processes(index, grace=0.0)

  def set_link(self, index: int, up: bool) -> None:
    """Host `index`'s link pulled out of the switch, or plugged back."""
    self.network.set_link(index, up)

  def add_host(self, token: bool = True) -> int:
    """A new host on the network, without Ray; with a copy of the token
    unless `token` is False. Returns its index."""
    index = self.network.add_host().index
    os.makedirs(os.path.join(self.home(index), '.ray'), mode=0o700,
                exist_ok=True)
    if token:
      self.copy_token(index)
    return index

  # Listeners.

  def listeners(self) -> Dict[int, List[Dict[str, Any]]]:
    """Every host's listening TCP sockets (`netns.Network.sockets`)."""
    return {i: self.network.sockets(i) for i in sorted(self.network.hosts)}

  def connections(self) -> Dict[int, List[Dict[str, Any]]]:
    """Every host's established TCP connections."""
    return {i: self.network.sockets(i, listening=False)
            for i in sorted(self.network.hosts)}

  # Teardown.

  @classmethod
  def attach(cls, name: str) -> 'Cluster':
    """The cluster `name` that another process started (to end it, or
    describe it); not closed at this process's exit."""
    return cls(netns.Network.load(name), cpus_per_host=0)

  def detach(self) -> None:
    """Leaves the cluster running after this process exits."""
    self.network.disown()
    self._closed = True
    atexit.unregister(self.close)

  def close(self) -> None:
    """Kills every process on every host; removes namespaces and files."""
    if self._closed:
      return
    self._closed = True
    atexit.unregister(self.close)
    self.network.destroy()

  def __enter__(self) -> 'Cluster':
    return self

  def __exit__(self, *unused_exc_info) -> None:
    self.close()
