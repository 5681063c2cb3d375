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


def _node_packages_installed() -> bool:
  # npm writes node_modules/.package-lock.json once an install has finished.
  modules = os.path.join(NODE_DIR, 'node_modules')
  return (os.path.isfile(os.path.join(modules, '.package-lock.json')) and
          os.path.isdir(os.path.join(modules, '@grpc', 'grpc-js')))


def require_node():
  """Skips where node or npm is absent; otherwise installs the client's npm
  packages from clients/node/package-lock.json (`npm ci`) unless they are
  there. A lock file beside them keeps two test workers from running npm at
  once."""
  import fcntl  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  missing = [tool for tool in ('node', 'npm') if shutil.which(tool) is None]
  if missing:
    pytest.skip(f'{" and ".join(missing)} not found on PATH: the Node.js '
                'client test needs node and npm (see clients/node/README.md)')
  if _node_packages_installed():
    return
  with open(os.path.join(NODE_DIR, '.npm-ci.lock'), 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes.
    if _node_packages_installed():  # Another worker installed them.
      return
    done = subprocess.run(
        ['npm', 'ci', '--no-audit', '--no-fund', '--loglevel=error'],
        cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=600, check=False)
    if done.returncode != 0 or not _node_packages_installed():
      pytest.fail(f'`npm ci` in {NODE_DIR} failed (exit status '
                  f'{done.returncode}):\n{done.stdout}')


class _Clients:
  python_client = staticmethod(python_client)
  node_client = staticmethod(node_client)
  summary = staticmethod(summary)
  require_node = staticmethod(require_node)


@pytest.fixture
def clients():
  """Starts client processes: clients.python(...), clients.node(...)."""
  return _Clients()
