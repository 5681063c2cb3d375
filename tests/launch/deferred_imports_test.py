"""launch.deferred_imports: a deferred module loads on first use, not before."""

import subprocess
import sys
import textwrap

from repertory.launch import deferred_imports


def _run(code: str) -> str:
  """Runs `code` in a fresh interpreter (nothing imported yet)."""
  result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)],
                          capture_output=True, text=True, check=False,
                          timeout=120)
  assert result.returncode == 0, result.stderr
  return result.stdout.strip()


def test_an_imported_module_runs_its_code_on_first_use():
  out = _run("""
      import sys
      from repertory.launch import deferred_imports
      deferred_imports.defer(('json',))
      import json
      import json as again
      # Its __init__ has not run, even for code that reads every module's
      # __file__ (TensorFlow's autograph does).
      print('json.decoder' in sys.modules, again is json,
            json.__file__.endswith('__init__.py'))
      print(json.dumps({'a': 1}))            # first use loads it
      print('json.decoder' in sys.modules)
      """)
  assert out.splitlines() == ['False True True', '{"a": 1}', 'True']


def test_pandas_is_deferred_by_default_and_works_when_used():
  assert 'pandas' in deferred_imports.DEFAULT
  out = _run("""
      import sys
      from repertory.launch import deferred_imports
      deferred_imports.defer()
      import pandas as pd
      print('pandas.core' in sys.modules)
      print(int(pd.DataFrame({'a': [1, 2]})['a'].sum()))
      """)
  assert out.splitlines() == ['False', '3']


def test_modules_already_imported_and_other_modules_are_untouched():
  out = _run("""
      import sys
      import json
      from repertory.launch import deferred_imports
      deferred_imports.defer(('json', 'wave'))
      deferred_imports.defer(('wave',))      # idempotent
      finders = [f for f in sys.meta_path
                 if type(f).__name__ == '_DeferringFinder']
      print(len(finders), sorted(finders[0].names))
      import plistlib                         # not deferred: loaded now
      print(type(plistlib).__name__, hasattr(plistlib, 'dumps'))
      """)
  assert out.splitlines() == ["1 ['wave']", 'module True']


def test_threads_that_use_it_while_its_code_runs_wait_for_it(tmp_path):
  (tmp_path / 'slow_module.py').write_text(textwrap.dedent('''
      import time
      time.sleep(1.0)  # Other threads ask for VALUE meanwhile.
      VALUE = 42
      '''))
  out = _run(f"""
      import sys, threading
      sys.path.insert(0, {str(tmp_path)!r})
      from repertory.launch import deferred_imports
      deferred_imports.defer(('slow_module',))
      import slow_module
      seen = []
      def use():
        try:
          seen.append(slow_module.VALUE)
        except AttributeError as e:
          seen.append(repr(e))
      threads = [threading.Thread(target=use) for _ in range(4)]
      for t in threads:
        t.start()
      for t in threads:
        t.join()
      print(seen)
      """)
  assert out == '[42, 42, 42, 42]'
