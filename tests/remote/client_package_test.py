"""The Python client installs alone (clients/python): its package requires
no TensorFlow, Reverb or Ray, and importing it loads none of them."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
HEAVY = ('tensorflow', 'tensorflow-cpu', 'dm-reverb', 'ray', 'dm-sonnet')


def test_the_client_package_installs_and_imports_without_the_agent_stack(
    tmp_path):
  target = os.path.join(tmp_path, 'site')
  install = subprocess.run(
      [sys.executable, '-m', 'pip', 'install', '--no-deps',
       '--no-build-isolation', '--no-index', '--quiet', '--target', target,
       os.path.join(ROOT, 'clients', 'python')],
      capture_output=True, text=True, timeout=300, cwd=tmp_path)
  assert install.returncode == 0, install.stderr
  [info] = [d for d in os.listdir(target) if d.endswith('.dist-info')]
  assert info.startswith('repertory_remote_client-')
  with open(os.path.join(target, info, 'METADATA')) as f:
    requires = [line.split(':', 1)[1].strip().lower() for line in f
                if line.startswith('Requires-Dist:')]
  assert requires, 'the client declares its dependencies'
  assert not [r for r in requires if r.split('<')[0].split('>')[0].split(
      '=')[0].split(';')[0].strip() in HEAVY], requires
  assert {'__init__.py', 'catch_client.py', 'client.py', 'environment_pb2.py',
          'wire.py'} <= set(os.listdir(os.path.join(target,
                                                    'repertory_remote')))
  code = textwrap.dedent('''
      import sys
      import repertory_remote
      from repertory_remote import catch_client
      assert repertory_remote.__file__.startswith(sys.argv[1]), (
          repertory_remote.__file__)
      loaded = sorted(m for m in sys.modules if m.split('.')[0] in (
          'tensorflow', 'reverb', 'ray', 'sonnet', 'repertory'))
      print('LOADED', loaded)
  ''')
  # Only the installed copy is on the path (not the checkout's).
  env = dict(os.environ, PYTHONPATH=target)
  result = subprocess.run([sys.executable, '-c', code, target],
                          capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
  assert result.returncode == 0, result.stderr
  assert 'LOADED []' in result.stdout
