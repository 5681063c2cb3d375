"""`launch.lazy('module:name')`: a callable named by its import path.

A program graph is built in the launcher and pickled into every node's
process. A function passed by value there (`learning.make_learner`) makes
both ends import its module: the launcher to name it, each process that
unpickles it (even one that never calls it, such as the run monitor holding
an evaluation-actor factory for the end of the run). A lazy reference
imports its module only when it is first called, so a launcher or a light
node that only passes it on imports nothing heavy (TensorFlow, Reverb):

```
program.add_node(launch.CourierNode(
    launch.lazy('repertory.agents.ppo.learning:make_learner'), config, ...))
```
"""

import importlib
from typing import Any, Callable, Mapping


class LazyRef:
  """Calls `module.name` (imported on the first call) with its arguments.

  Pickles as the path alone; equal references compare equal.
  """

  def __init__(self, module: str, name: str):
    if not module or not name:
      raise ValueError(f"A lazy reference needs 'module:name', got "
                       f'{module!r}:{name!r}.')
    self.module = module
    self.name = name
    self._target = None
    # What node labels and descriptions show.
    self.__name__ = name.rsplit('.', 1)[-1]
    self.__qualname__ = name

  def resolve(self) -> Any:
    """Imports the module (once) and returns the object it names."""
    if self._target is None:
      target: Any = importlib.import_module(self.module)
      for part in self.name.split('.'):
        try:
          target = getattr(target, part)
        except AttributeError:
          raise AttributeError(
              f'Lazy reference {self.module}:{self.name}: module '
              f'{self.module!r} has no {self.name!r}.') from None
      self._target = target
    return self._target

  def __call__(self, *args, **kwargs) -> Any:
    return self.resolve()(*args, **kwargs)

  def __reduce__(self):
    return (LazyRef, (self.module, self.name))

  def __eq__(self, other: Any) -> bool:
    return (isinstance(other, LazyRef) and
            (self.module, self.name) == (other.module, other.name))

  def __hash__(self) -> int:
    return hash((self.module, self.name))

  def __repr__(self) -> str:
    return f"launch.lazy('{self.module}:{self.name}')"


def lazy(path: str) -> LazyRef:
  """A reference to `'package.module:name'` (or `'...:Class.method'`) that
  imports the module when first called; see the module docstring."""
  module, sep, name = path.partition(':')
  if not sep:
    raise ValueError(f"launch.lazy takes 'module:name', got {path!r}.")
  return LazyRef(module, name)


def lazy_attributes(package: str,
                    modules: Mapping[str, str]) -> Callable[[str], Any]:
  """A package's `__getattr__` that imports each name's module on first use.

      __getattr__ = launch.lazy_attributes(__name__, {
          'make_program': 'repertory.agents.a3c.program'})

  `modules` maps an attribute to the module that defines it; any other name
  raises `AttributeError` as a plain module would.
  """
  modules = dict(modules)

  def getattr_(name: str) -> Any:
    if name not in modules:
      raise AttributeError(f'module {package!r} has no attribute {name!r}')
    return getattr(importlib.import_module(modules[name]), name)

  return getattr_
