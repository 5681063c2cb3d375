"""Modules a node process loads only when something uses them.

TensorFlow 2.15 imports Keras at start-up (`keras.src.optimizers`, to
register Keras' optimizers for SavedModels that hold one), and Keras
imports pandas in case a model is fed a pandas DataFrame; no node of
repertory uses Keras (Sonnet modules, `tf.train.Checkpoint`) or pandas, yet
every process with TensorFlow would carry both. `defer(('pandas',
'keras'))` makes `import pandas` in this process return a module whose code
runs on the first use of one of its attributes (as the standard library's
`importlib.util.LazyLoader`, which would also run it when TensorFlow's
autograph reads every module's `__file__`): code that uses pandas gets the
real module; a process that only imports it never loads it. Submodules
imported while their package waits (TensorFlow's `import_module(
'keras.src.optimizers')`) wait with it; when the package's code runs they
are dropped, so its own imports load them in their usual order (`tf.keras`
works as before). Installed in every node process of local_mp / ray
(`ray_node.NodeActor`); the launcher's own process is left alone.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Iterable, Optional

DEFAULT = ('pandas', 'keras')
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
        if '.' in self.__name__:
          _load_submodule(self)
        else:
          _run_code(self)
    return getattr(self, name)


def _run_code(module: _DeferredModule) -> None:
  """Runs the code of deferred top-level `module`, in it (as an import
  would), after dropping its submodules that waited with it."""
  _drop_waiting_submodules(module.__name__)
  loader = module.__spec__.loader.wrapped
  module.__loader__ = module.__spec__.loader = loader
  module.__dict__[_RUNNING] = True
  try:
    loader.exec_module(module)
  finally:
    del module.__dict__[_RUNNING]
    module.__class__ = types.ModuleType


def _waiting(name: str) -> bool:
  """Whether module `name` is deferred and its code has not started."""
  module = sys.modules.get(name)
  return (type(module) is _DeferredModule and  # pylint: disable=unidiomatic-typecheck
          _RUNNING not in module.__dict__)


def _drop_waiting_submodules(package: str) -> None:
  """Forgets the deferred submodules of `package` (imported while it
  waited), so that its code imports them afresh in its own order."""
  for name in [n for n in sys.modules if n.startswith(package + '.')]:
    module = sys.modules[name]
    if type(module) is not _DeferredModule:  # pylint: disable=unidiomatic-typecheck
      continue
    del sys.modules[name]
    parent_name, _, attribute = name.rpartition('.')
    parent = sys.modules.get(parent_name)
    if parent is not None and parent.__dict__.get(attribute) is module:
      del parent.__dict__[attribute]


def _load_submodule(module: _DeferredModule) -> None:
  """Loads deferred submodule `module` as its package would: the package
  first (which drops `module` from `sys.modules`), then the submodule,
  whose namespace `module` takes (a copy: later rebinding of its globals is
  not seen through `module`; only code that kept the deferred object, which
  the import statements do not, holds it)."""
  top = module.__name__.partition('.')[0]
  if _waiting(top):
    _run_code(sys.modules[top])
  real = importlib.import_module(module.__name__)
  module.__dict__.update(real.__dict__)
  module.__class__ = types.ModuleType


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
    if fullname in sys.modules or not (
        fullname in self.names or
        # A submodule imported while its deferred package waits.
        (fullname.partition('.')[0] in self.names and
         _waiting(fullname.partition('.')[0]))):
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
  names = frozenset(names)
  nested = sorted(n for n in names if '.' in n)
  if nested:
    raise ValueError(f'defer() takes top-level modules (their submodules '
                     f'wait with them), got {nested}.')
  names = frozenset(n for n in names if n not in sys.modules)
  finder = _installed()
  if finder is not None:
    finder.names = finder.names | names
  elif names:
    sys.meta_path.insert(0, _DeferringFinder(names))
