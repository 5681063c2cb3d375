"""Modules a node process loads only when something uses them.

TensorFlow 2.15 imports Keras at start-up (to register its optimizers), and
Keras imports pandas in case a model is fed a pandas DataFrame; no node of
repertory uses pandas, yet every process with TensorFlow would carry it.
`defer(('pandas',))` makes the first `import pandas` in this process return
a module whose code runs on first attribute access
(`importlib.util.LazyLoader`, the standard library's lazy import): code
that uses pandas gets the real module; a process that only imports it never
loads it. Installed in every node process of local_mp / ray
(`ray_backend.NodeActor`); the launcher's own process is left alone.
"""

import importlib.abc
import importlib.util
import sys
from typing import Iterable, Optional

DEFAULT = ('pandas',)


class _DeferringFinder(importlib.abc.MetaPathFinder):
  """Finds `names` with the other finders and makes their loaders lazy."""

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
    spec.loader = importlib.util.LazyLoader(spec.loader)
    return spec


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
