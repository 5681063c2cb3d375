"""launch.deferred_imports: a deferred module loads on first use, not before."""

import subprocess
import sys
import textwrap

import pytest

from repertory.launch.process import deferred_imports


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
      from repertory.launch.process import deferred_imports
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
      from repertory.launch.process import deferred_imports
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
      from repertory.launch.process import deferred_imports
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
      from repertory.launch.process import deferred_imports
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


def test_submodules_imported_while_their_package_waits_load_in_its_order(
    tmp_path):
  # A package whose __init__ must run before its submodules (as Keras'):
  # `pkg.core` reads a name that only `pkg/__init__.py` sets.
  package = tmp_path / 'pkg'
  package.mkdir()
  (package / '__init__.py').write_text(textwrap.dedent('''
      ORDER = ['pkg']
      from pkg import core
      '''))
  (package / 'core.py').write_text(textwrap.dedent('''
      import pkg
      pkg.ORDER.append('pkg.core')
      from pkg import extra
      '''))
  (package / 'extra.py').write_text("VALUE = 7\n")
  out = _run(f"""
      import importlib, sys
      sys.path.insert(0, {str(tmp_path)!r})
      from repertory.launch.process import deferred_imports
      deferred_imports.defer(('pkg',))
      importlib.import_module('pkg.core')    # as TensorFlow imports Keras
      import pkg.extra
      print(sorted(n for n in sys.modules if n.startswith('pkg')),
            [type(sys.modules[n]).__name__ for n in ('pkg', 'pkg.core')])
      print(pkg.ORDER, pkg.extra.VALUE)      # first use: the package's order
      print(sys.modules['pkg.core'] is pkg.core, pkg.core.extra.VALUE)
      """)
  assert out.splitlines() == [
      "['pkg', 'pkg.core', 'pkg.extra'] ['_DeferredModule', '_DeferredModule']",
      "['pkg', 'pkg.core'] 7",
      'True 7']


def test_a_deferred_submodule_used_first_loads_its_package_first(tmp_path):
  package = tmp_path / 'pkg2'
  package.mkdir()
  (package / '__init__.py').write_text("READY = True\nfrom pkg2 import core\n")
  (package / 'core.py').write_text(
      "import pkg2\nassert pkg2.READY\nVALUE = 3\n")
  out = _run(f"""
      import importlib, sys
      sys.path.insert(0, {str(tmp_path)!r})
      from repertory.launch.process import deferred_imports
      deferred_imports.defer(('pkg2',))
      core = importlib.import_module('pkg2.core')
      print(core.VALUE, type(sys.modules['pkg2']).__name__)
      """)
  assert out == '3 module'


def test_tensorflow_without_keras_until_tf_keras_is_used():
  assert 'keras' in deferred_imports.DEFAULT
  out = _run("""
      import sys
      from repertory.launch.process import deferred_imports
      deferred_imports.defer()
      import tensorflow as tf
      print(type(sys.modules['keras']).__name__,
            'keras.src.engine' in sys.modules, 'pandas' in sys.modules)
      print(float(tf.function(lambda x: x * 2)(tf.constant(2.0))))
      print(tf.keras.layers.Dense(3)(tf.ones([1, 2])).shape)
      """)
  assert out.splitlines()[-3:] == ['_DeferredModule False False', '4.0',
                                   '(1, 3)']


def test_a_submodule_name_is_refused():
  with pytest.raises(ValueError, match=r"top-level modules .*\['keras.src'\]"):
    deferred_imports.defer(('keras.src',))
