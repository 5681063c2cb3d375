"""Importing repertory.launch (and building a program) imports no TF/Ray."""

import subprocess
import sys
import textwrap


def test_importing_launch_imports_neither_tensorflow_nor_ray_nor_reverb():
  code = textwrap.dedent('''
      import sys
      from repertory import launch
      program = launch.Program('p')
      replay = program.add_node(launch.ReverbNode(lambda: []))
      program.add_node(launch.CourierNode(dict, replay))
      heavy = [m for m in ('tensorflow', 'reverb', 'ray', 'sonnet')
               if m in sys.modules]
      print('HEAVY', heavy)
  ''')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120, check=True)
  assert 'HEAVY []' in result.stdout, result.stdout + result.stderr
