"""Modules a node process loads only when something uses them.

TensorFlow 2.15 imports Keras at start-up (to register its optimizers), and
Keras imports pandas in case a model is fed a pandas DataFrame; no node of
repertory uses pandas, yet every process with TensorFlow would carry it.
`defer(('pandas',))` makes `import pandas` in this process return a module
whose code runs on the first use of one of its attributes (as the standard
library's `importlib.util.LazyLoader`, which would also run it when
TensorFlow's autograph reads every module's `__file__`): code that uses
pandas gets the real module; a process that only imports it never loads
it. Installed in every node process of local_mp / ray
(`ray_backend.NodeActor`); the launcher's own process is left alone.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Iterable, Optional

DEFAULT = ('pandas',)
_LOCK = threading.RLock()
_RUNNING = '__deferred_code_running__'


class _DeferredModule(types.ModuleType):
  """A module whose code has not run yet. Its import-system attributes
  (`__name__`, `__file__`, `__spec__`, `__path__`, ...) are set, so code
  that only scans `sys.modules` (TensorFlow's autograph reads every module's
  `__file__`) leaves it unloaded; any other attribute runs its code first."""

  def __getattr__(self, name):
    with _LOCK:  # Other threads wait here until the code has run.
      if type(self) is _DeferredModule:  # pylint: disable=unidiomatic-typecheck
        if self.__dict__.get(_RUNNING):  # Asked by the module's own code.
          raise AttributeError(
              f'partially initialized module {self.__name__!r} has no '
              f'attribute {name!r}')
        loader = self.__spec__.loader.wrapped
        self.__loader__ = self.__spec__.loader = loader
        self.__dict__[_RUNNING] = True
        try:
          loader.exec_module(self)  # As an import would, in this module.
        finally:
          del self.__dict__[_RUNNING]
          self.__class__ = types.ModuleType
    return getattr(self, name)


class _DeferringLoader(importlib.abc.Loader):
  """Creates the module as `wrapped` would and leaves its code for later."""

  def __init__(self, wrapped: importlib.abc.Loader):
    self.wrapped = wrapped

  def create_module(self, spec):
    return self.wrapped.create_module(spec)

  def exec_module(self, module):
    module.__class__ = _DeferredModule


class _DeferringFinder(importlib.abc.MetaPathFinder):
  """Finds `names` with the other finders and defers their code."""

  def __init__(self, names: Iterable[str]):
    self.names = frozenset(names)

  def find_spec(self, fullname, path, target=None):
    if fullname not in self.names or fullname in sys.modules:
      return None
    for finder in sys.meta_path:
      if finder is self or not hasattr(finder, 'find_spec'):
        continue
      spec = finder.find_spec(fullname, path, target)
      if spec is not None:
        break
    else:
      return None
    if spec.loader is None or not hasattr(spec.loader, 'exec_module'):
      return spec  # Namespace packages, builtins: imported as usual.
    spec.loader = _DeferringLoader(spec.loader)
    return spec


def deferred_module(spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
  """A module of `spec` whose code runs on the first use of an attribute
  that is not set on it (the caller puts it in `sys.modules`)."""
  spec.loader = _DeferringLoader(spec.loader)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _installed() -> Optional[_DeferringFinder]:
  for finder in sys.meta_path:
    if isinstance(finder, _DeferringFinder):
      return finder
  return None


def defer(names: Iterable[str] = DEFAULT) -> None:
  """Top-level modules `names`, not imported yet, load on first use.

  Idempotent; modules already imported are left as they are.
  """
  names = frozenset(n for n in names if n not in sys.modules)
  finder = _installed()
  if finder is not None:
    finder.names = finder.names | names
  elif names:
    sys.meta_path.insert(0, _DeferringFinder(names))
