"""The one private name of cloudpickle used, in one place.

Written for the cloudpickle that Ray 2.60.0 installs beside it (`PINNED`);
tests/launch/private_apis_test.py fails when the installed cloudpickle is
another version or the name is gone.

- `code_reduce`: cloudpickle's own reduction of a code object
  (`cloudpickle.cloudpickle._code_reduce`), so that `backends.pickling` can
  keep a function's file name where cloudpickle writes '<dynamic-code>'.
"""

import types
from typing import Any

import cloudpickle

PINNED = ('cloudpickle', '3.1')
# (module, attribute path) of every private name used here.
PRIVATE_NAMES = (('cloudpickle.cloudpickle', '_code_reduce'),)


def code_reduce(code: types.CodeType) -> Any:
  """cloudpickle's `(rebuild, args)` for `code`, or NotImplemented if it
  has none (or fails)."""
  try:
    return cloudpickle.cloudpickle._code_reduce(code)  # pylint: disable=protected-access
  except Exception:  # pylint: disable=broad-except
    return NotImplemented
