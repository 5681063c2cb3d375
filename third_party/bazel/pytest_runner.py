"""Runs one pytest file as a Bazel `py_test` (see repertory_py_test in defs.bzl).

Usage (Bazel passes these as the test's args):

  pytest_runner.py TEST_FILE [-m MARK_EXPRESSION]

The test, and every Python process it starts, sees only the repertory modules
its BUILD dependencies put in its runfiles: the editable install of repertory
in the virtual environment is taken off the import path first, so that a
missing BUILD edge fails here instead of being hidden by the source checkout.
"""

import faulthandler
import os
import signal
import sys
from typing import List


def _drop_editable_install() -> None:
  """Removes setuptools' editable-install finders for repertory.

  Here, and (through strict_imports/sitecustomize.py) in every Python process
  the test starts.
  """
  strict = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'strict_imports')
  os.environ['PYTHONPATH'] = os.pathsep.join(
      [strict] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep)
                  if p])
  sys.meta_path[:] = [
      finder for finder in sys.meta_path
      if not getattr(finder, '__module__', '').startswith('__editable__')
  ]
  for name in list(sys.modules):
    if name.startswith('__editable__'):
      del sys.modules[name]


def _interrupt_on_sigterm() -> None:
  """Bazel ends a test past its timeout with SIGTERM: report what ran.

  Every thread's stack shows where the test was stuck; as a
  KeyboardInterrupt, pytest then prints the failures so far, which the log
  would otherwise lose.
  """

  stderr = os.dup(2)  # pytest captures fd 2 while a test runs

  def handler(signum, frame):
    del signum, frame
    os.write(stderr, b'\nSIGTERM from Bazel (timeout); all threads:\n')
    faulthandler.dump_traceback(file=stderr, all_threads=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt('SIGTERM from Bazel: the test ran past its timeout')

  signal.signal(signal.SIGTERM, handler)


def _pytest_args(test_file: str, extra: List[str]) -> List[str]:
  """The pytest command line for one test file under Bazel."""
  here = os.path.dirname(os.path.abspath(__file__))
  args = [
      test_file,
      # Settings for Bazel (pyproject.toml's `-n 2` does not apply here: Bazel
      # runs the test targets in parallel itself).
      '-c', os.path.join(here, 'pytest.ini'),
      '--rootdir', os.getcwd(),
      '-p', 'no:cacheprovider',
      '-p', 'no:xdist',
      '-q',
      '-rfE',  # name failures and errors in the summary
      '--durations=5',  # the slowest tests, to size the target
  ]
  xml_output = os.environ.get('XML_OUTPUT_FILE')
  if xml_output:
    args += ['--junitxml', xml_output]
  tmpdir = os.environ.get('TEST_TMPDIR')
  if tmpdir:
    args += ['--basetemp', os.path.join(tmpdir, 'pytest')]
  # Let a hung test print its stack (pytest-timeout) before Bazel kills the
  # whole target at its size's timeout.
  timeout = int(os.environ.get('TEST_TIMEOUT', '0'))
  if timeout:
    args += ['-o', f'timeout={max(10, int(timeout * 0.9))}']
  return args + extra


def main(argv: List[str]) -> int:
  if len(argv) < 2:
    print(f'usage: {argv[0]} TEST_FILE [pytest args...]', file=sys.stderr)
    return 2
  _drop_editable_install()
  _interrupt_on_sigterm()
  import pytest  # pylint: disable=g-import-not-at-top
  return int(pytest.main(_pytest_args(argv[1], argv[2:])))


if __name__ == '__main__':
  sys.exit(main(sys.argv))
