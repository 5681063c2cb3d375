"""The versions the private-API workarounds were written for, and a check.

Each module of `launch/process/` that reaches into a private name of a
third-party package says which version it was written for (`PINNED`: a
distribution and a version, or a version prefix such as '2.15') and which
names it uses (`PRIVATE_NAMES`: (module, attribute path)). `problems()` lists,
in one line each, a pinned package installed at another version and a
private name that cannot be found; tests/launch/private_apis_test.py fails
on any. Only the command or test that calls it imports the packages.
"""

import importlib
import importlib.metadata
from typing import List, Tuple

# The modules of launch/process/ with a private-API workaround.
MODULES = ('ray_internals', 'tf_internals', 'reverb_lite',
           'cloudpickle_internals')


def _module(name: str):
  return importlib.import_module(f'repertory.launch.process.{name}')


def pins() -> List[Tuple[str, str, str]]:
  """(module of launch/process, distribution, version it was written for)."""
  return [(name, *_module(name).PINNED) for name in MODULES]


def private_names() -> List[Tuple[str, str, str]]:
  """(module of launch/process, module, attribute path) of every private
  name used."""
  return [(name, module, path) for name in MODULES
          for module, path in _module(name).PRIVATE_NAMES]


def version_matches(installed: str, pinned: str) -> bool:
  """Whether `installed` is `pinned`, or within it if `pinned` is a prefix
  ('2.15' takes '2.15.1', not '2.150')."""
  return installed == pinned or installed.startswith(pinned + '.')


def _resolve(module: str, path: str) -> None:
  value = importlib.import_module(module)
  for attribute in path.split('.'):
    value = getattr(value, attribute)


def problems() -> List[str]:
  """One line per pinned package at another version, and per private name
  that is gone."""
  found = []
  for name, distribution, pinned in pins():
    try:
      installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
      installed = 'not installed'
    if not version_matches(installed, pinned):
      found.append(f'launch/process/{name}.py was written for {distribution} '
                   f'{pinned}; {installed} is installed: check its private '
                   'names and update PINNED.')
  for name, module, path in private_names():
    try:
      _resolve(module, path)
    except (ImportError, AttributeError) as e:
      found.append(f'launch/process/{name}.py uses {module}.{path}, which is '
                   f'gone ({type(e).__name__}: {e}).')
  return found
