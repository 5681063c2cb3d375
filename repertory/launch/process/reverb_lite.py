"""Reverb's writing client without TensorFlow's Python.

`import reverb` imports TensorFlow (seconds of CPU and hundreds of MiB per
process: BENCHMARKS.md), although writing items needs only Reverb's C++
client: its extension module links TensorFlow's C++ framework library, not
its Python.
An actor that only writes connects with

    client = reverb_lite.connect(address)
    writer = client.trajectory_writer(num_keep_alive_refs=2)

and gets Reverb's own `TrajectoryWriter` over the C++ client, loaded without
`reverb/__init__.py`. Anything else asked of the client (`sample`,
`server_info`, ...) is forwarded to a full `reverb.Client`, created (and
TensorFlow imported) on first use. Where Reverb is already imported,
`connect` returns a plain `reverb.Client`.

The modules loaded here are registered under Reverb's own names
(`reverb.libpybind`, `reverb.pybind`, `reverb.errors`,
`reverb.trajectory_writer`), and `reverb` itself as a package whose
`__init__` runs on first use: a later `import reverb; reverb.Client(...)` in
the same process reuses them instead of loading the extension twice.

Reverb's extension module (`reverb.libpybind`) and the file name of
TensorFlow's framework library are not public API: written for
`dm-reverb==0.14.0` (`PINNED`) and TensorFlow 2.15; `PRIVATE_NAMES` lists what
is used, and tests/launch/private_apis_test.py fails when the installed
Reverb is another version or one of the names is gone.
"""

import ctypes
import importlib
import importlib.machinery
import os
import sys
import threading
from typing import Any, NamedTuple

from repertory.launch.process import deferred_imports

PINNED = ('dm-reverb', '0.14.0')
# (module, attribute path) of every private name used here.
PRIVATE_NAMES = (
    ('reverb.libpybind', 'Client'),
    ('reverb.libpybind', 'AutoTunedChunkerOptions'),
    ('reverb.trajectory_writer', 'TrajectoryWriter'),
    ('reverb.errors', 'DeadlineExceededError'),
    ('reverb.libpybind', 'TrajectoryWriter.Append'),
    ('reverb.libpybind', 'TrajectoryWriter.CreateItem'),
)
_LOCK = threading.Lock()
_FRAMEWORK = 'libtensorflow_framework.so.2'
_libraries = []  # The framework library stays loaded for the process.


class _Modules(NamedTuple):
  pybind: Any
  errors: Any
  trajectory_writer: Any


def _spec(name: str) -> importlib.machinery.ModuleSpec:
  # PathFinder does not execute the package (find_spec would consult
  # sys.modules, where tests block TensorFlow with None).
  spec = importlib.machinery.PathFinder.find_spec(name)
  if spec is None or not spec.submodule_search_locations:
    raise ImportError(f'reverb_lite: the {name!r} package is not installed.')
  return spec


def _load_without_tensorflow() -> None:
  """Registers `reverb` (its __init__ deferred) and the writer's modules."""
  if not _libraries:
    # Loaded by path, locally: the extension's dependency on it is then met
    # by its soname, and its symbols stay out of the global scope.
    directory = list(_spec('tensorflow').submodule_search_locations)[0]
    _libraries.append(ctypes.CDLL(os.path.join(directory, _FRAMEWORK)))
  # reverb/__init__.py imports TensorFlow: it runs on the first use of any
  # other attribute of the package (e.g. `reverb.Client`).
  package = deferred_imports.deferred_module(_spec('reverb'))
  sys.modules['reverb'] = package
  try:
    libpybind = importlib.import_module('reverb.libpybind')
    # reverb/pybind.py imports TensorFlow, then re-exports libpybind.
    sys.modules['reverb.pybind'] = package.pybind = libpybind
    importlib.import_module('reverb.errors')
    importlib.import_module('reverb.trajectory_writer')
  except BaseException:
    for name in ('reverb', 'reverb.libpybind', 'reverb.pybind',
                 'reverb.errors', 'reverb.trajectory_writer'):
      sys.modules.pop(name, None)
    raise


def modules() -> _Modules:
  """Reverb's C++ client, errors and `TrajectoryWriter` modules."""
  with _LOCK:
    if 'reverb' not in sys.modules:
      _load_without_tensorflow()
    return _Modules(*(importlib.import_module(f'reverb.{name}')
                      for name in _Modules._fields))


def _reverb_imported() -> bool:
  module = sys.modules.get('reverb')
  return module is not None and 'Client' in vars(module)


def cpp_writer(writer: Any) -> Any:
  """The C++ writer behind Reverb's Python `TrajectoryWriter` (its private
  `_writer`): `Append(flat_step)` takes a step's leaves in a fixed column
  order (None for a column the step leaves out) and returns their
  references; `CreateItem(table, priority, columns, squeeze)` takes one
  list of references per leaf of the item, in `tree.flatten` order of the
  table signature. Reverb's Python writer flattens, orders and re-nests
  its arguments on every call, which costs more than the writing itself for
  a few small columns."""
  internal = getattr(writer, '_writer', None)
  if not isinstance(internal, modules().pybind.TrajectoryWriter):
    raise TypeError(
        f'reverb_lite.cpp_writer: {type(writer).__name__} holds no '
        f'reverb.libpybind.TrajectoryWriter (written for dm-reverb '
        f'{PINNED[1]}).')
  return internal


def errors() -> Any:
  """`reverb.errors` (e.g. `DeadlineExceededError`), without TensorFlow."""
  return modules().errors


class WriterClient:
  """A `reverb.Client` whose writers need no TensorFlow (see the module
  docstring); other methods go to a full `reverb.Client`."""

  def __init__(self, server_address: str):
    self._server_address = server_address
    self._cpp_client = modules().pybind.Client(server_address)
    self._full = None

  @property
  def server_address(self) -> str:
    return self._server_address

  @property
  def __class__(self):  # pylint: disable=invalid-overridden-method
    """`reverb.Client` once this process has imported Reverb, so that
    `isinstance(client, reverb.Client)` holds as under Launchpad (the check
    names `reverb.Client`, which imports it); this class before, so that
    looking at the class imports no TensorFlow. `type(client)` is always
    this class."""
    if _reverb_imported():
      import reverb  # pylint: disable=g-import-not-at-top
      return reverb.Client
    return WriterClient

  def trajectory_writer(self, num_keep_alive_refs: int, *,
                        validate_items: bool = True) -> Any:
    """Reverb's `TrajectoryWriter` (as `reverb.Client.trajectory_writer`)."""
    if num_keep_alive_refs < 1:
      raise ValueError(f'num_keep_alive_refs must be a positive integer, got '
                       f'{num_keep_alive_refs}.')
    lib = modules()
    options = lib.pybind.AutoTunedChunkerOptions(num_keep_alive_refs, 1.0)
    return lib.trajectory_writer.TrajectoryWriter(
        self._cpp_client.NewTrajectoryWriter(options, validate_items))

  def __getattr__(self, name: str) -> Any:
    if name.startswith('_'):
      raise AttributeError(name)
    if self._full is None:
      import reverb  # pylint: disable=g-import-not-at-top
      self._full = reverb.Client(self._server_address)
    return getattr(self._full, name)

  def __reduce__(self):
    return connect, (self._server_address,)

  def __repr__(self) -> str:
    return f'reverb_lite.WriterClient(server_address={self._server_address!r})'


def connect(server_address: str) -> Any:
  """A `reverb.Client` where Reverb is imported, else a `WriterClient`."""
  if _reverb_imported():
    import reverb  # pylint: disable=g-import-not-at-top
    return reverb.Client(server_address)
  return WriterClient(server_address)
