"""Takes the virtual environment's editable install of repertory off the path.

Only for tests run by Bazel: pytest_runner.py puts this folder first on
PYTHONPATH, so that every Python process a test starts (a subprocess, a Ray
worker) imports repertory only from the test's runfiles, as the test itself
does, and a missing BUILD edge fails there too.
"""

import sys

sys.meta_path[:] = [
    finder for finder in sys.meta_path
    if not getattr(finder, '__module__', '').startswith('__editable__')
]
