"""What a launched program listens on: channels bind loopback in local_mt
and local_mp and serve only holders of the program's key, local_mp's Ray
processes listen on loopback only; a Ray instance without token
authentication is refused."""

import ipaddress
import os
import subprocess
import sys
import textwrap

import cloudpickle
import psutil
import pytest

from repertory import launch
from repertory.launch.backends import ray_auth

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Served:
  """A node with a channel, that says where it runs."""

  def __init__(self):
    self._channel = launch.LazyChannel(self.where)

  def where(self, x=None):
    return {'pid': os.getpid(), 'x': x}

  def address(self) -> str:
    return self._channel.address()


def _listening(port: int):
  """(ip, pid) of every listening TCP socket on `port`, of any process."""
  return {(c.laddr.ip, c.pid)
          for c in psutil.net_connections('tcp')
          if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


def _loopback(ip: str) -> bool:
  """127.0.0.1, ::1 or an IPv4-mapped IPv6 loopback (::ffff:127.0.0.1)."""
  address = ipaddress.ip_address(ip)
  return (getattr(address, 'ipv4_mapped', None) or address).is_loopback


def _check(launch_type: str, tmp_path) -> int:
  program = launch.Program('bind')
  with program.group('served'):
    handle = program.add_node(launch.CourierNode(Served))
  launched = launch.launch(program, launch_type=launch_type,
                           logdir=str(tmp_path), block=False,
                           termination_notice_secs=5)
  try:
    address = handle.dereference().address()
    host, port = address.rsplit(':', 1)
    assert host == '127.0.0.1'
    listening = _listening(int(port))
    assert [ip for ip, _ in listening] == ['127.0.0.1'], listening
    # This process holds the program's key (the launcher made it; in
    # local_mp the node got it from Ray), a stranger's key is refused.
    client = launch.ChannelClient(address)
    reply = client.call(7)
    client.close()
    assert reply['x'] == 7
    with pytest.raises(launch.ChannelAuthenticationError):
      launch.ChannelClient(address, authkey=os.urandom(32))
    if launch_type == 'local_mp':
      import ray  # pylint: disable=g-import-not-at-top
      gcs_address = ray.get_runtime_context().gcs_address
      assert gcs_address.startswith('127.0.0.1:'), gcs_address
      assert ray_auth.gcs_requires_token(gcs_address) is True
      # Ray's own servers too: the GCS, the raylet and its agents, the
      # workers' and this driver's gRPC servers.
      tree = {os.getpid()} | {p.pid for p in
                              psutil.Process().children(recursive=True)}
      beyond = {(c.laddr.ip, c.laddr.port, psutil.Process(c.pid).name())
                for c in psutil.net_connections('tcp')
                if c.status == psutil.CONN_LISTEN and c.pid in tree and
                not _loopback(c.laddr.ip)}
      assert not beyond, f'listening beyond loopback: {beyond}'
      assert len({c.pid for c in psutil.net_connections('tcp')
                  if c.status == psutil.CONN_LISTEN and c.pid in tree}) >= 3
  finally:
    launched.stop(timeout=60)
  return reply['pid']


def test_local_mt_binds_loopback(tmp_path):
  assert _check('local_mt', tmp_path) == os.getpid()


def test_local_mp_binds_loopback_and_requires_ray_s_token(tmp_path):
  assert _check('local_mp', tmp_path) != os.getpid()


_LAUNCH_WITHOUT_TOKEN = textwrap.dedent("""
    from repertory import launch

    def nothing():
      pass

    program = launch.Program('open')
    program.add_node(launch.PyNode(nothing))
    try:
      launch.launch(program, launch_type='local_mp', logdir={logdir!r})
    except launch.LaunchError as e:
      print('REFUSED:', e)
    else:
      print('LAUNCHED')
""")


def test_a_ray_instance_without_token_auth_is_refused(tmp_path):
  env = dict(os.environ, RAY_AUTH_MODE='disabled')
  env.pop(ray_auth.ALLOW_ENV, None)
  result = subprocess.run(
      [sys.executable, '-c',
       _LAUNCH_WITHOUT_TOKEN.format(logdir=str(tmp_path))],
      env=env, capture_output=True, text=True, timeout=240, check=False)
  assert 'REFUSED:' in result.stdout, result.stdout + result.stderr
  assert 'accepts calls without a token' in result.stdout
  assert 'ray get-auth-token --generate' in result.stdout
  assert ray_auth.ALLOW_ENV in result.stdout
