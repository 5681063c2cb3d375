"""Helpers for the remote environment tests: client processes."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
NODE_DIR = os.path.join(ROOT, 'clients', 'node')


def _env(token):
  env = dict(os.environ, REPERTORY_REMOTE_TOKEN=token)
  env['PYTHONPATH'] = os.pathsep.join(
      [ROOT] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
  return env


def python_client(address_file, token, *args, **kwargs):
  """Starts `python -m repertory_remote.catch_client` (a separate process)."""
  return subprocess.Popen(
      [sys.executable, '-m', 'repertory_remote.catch_client',
       f'--address_file={address_file}', *args],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=_env(token), **kwargs)


def node_client(address_file, token, *args):
  """Starts `node clients/node/catch_client.js` (a separate process)."""
  return subprocess.Popen(
      ['node', os.path.join(NODE_DIR, 'catch_client.js'),
       f'--address_file={address_file}', *args],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=_env(token))


def summary(process, timeout=240):
  """Waits for a client process; returns its final JSON line."""
  out, err = process.communicate(timeout=timeout)
  assert process.returncode == 0, f'client failed:\n{out}\n{err}'
  return json.loads(out.strip().splitlines()[-1])


def require_node():
  """Skips where node is absent; fails if the npm packages are missing."""
  import shutil  # pylint: disable=g-import-not-at-top
  if shutil.which('node') is None:
    pytest.skip('node is not installed on this machine: the Node.js client '
                'test needs node and npm (see clients/node/README.md)')
  if not os.path.isdir(os.path.join(NODE_DIR, 'node_modules', '@grpc')):
    pytest.fail('clients/node/node_modules is missing: run `npm ci` in '
                'clients/node (.ci/run does)')


class _Clients:
  python_client = staticmethod(python_client)
  node_client = staticmethod(node_client)
  summary = staticmethod(summary)
  require_node = staticmethod(require_node)


@pytest.fixture
def clients():
  """Starts client processes: clients.python(...), clients.node(...)."""
  return _Clients()
