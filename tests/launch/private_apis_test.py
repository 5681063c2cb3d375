"""Every private Ray/TensorFlow/Reverb/cloudpickle name that launch/process/
uses still exists, at the version its module was written for; a new version
fails here, loudly, before a workaround silently stops working."""

import importlib
import inspect
import pathlib
import re

import pytest

from repertory.launch.process import pins
from repertory.launch.process import ray_internals

_REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('module,distribution,pinned', pins.pins())
def test_the_installed_version_is_the_one_written_for(module, distribution,
                                                      pinned):
  installed = pins.installed_version(distribution)
  assert pins.version_matches(installed, pinned), (
      f'launch/process/{module}.py was written for {distribution} {pinned}, '
      f'but {installed} is installed: check every name in its PRIVATE_NAMES '
      'against the new version, then update PINNED.')


@pytest.mark.parametrize('module,name,path', pins.private_names())
def test_each_private_name_is_there(module, name, path):
  value = importlib.import_module(name)
  for attribute in path.split('.'):
    assert hasattr(value, attribute), (
        f'launch/process/{module}.py uses {name}.{path}: gone from the '
        'installed version.')
    value = getattr(value, attribute)


def test_ray_params_take_the_fields_set_at_start():
  from ray._private import parameter  # pylint: disable=g-import-not-at-top
  fields = inspect.signature(parameter.RayParams.__init__).parameters
  for field in ray_internals.RAY_PARAMS_FIELDS:
    assert field in fields, f'RayParams has no {field!r} any more.'


def test_problems_is_empty_and_says_what_differs():
  assert pins.problems() == []
  assert pins.version_matches('2.15.1', '2.15')
  assert not pins.version_matches('2.150.0', '2.15')
  assert not pins.version_matches('2.61.0', '2.60.0')


# Private names of these packages, used from code: only launch/process/ may.
_PRIVATE_USE = re.compile(
    r'\b(ray\._private|ray\._raylet|_call_tf_sessionrun|_as_tf_output|'
    r'reverb\.libpybind|cloudpickle\._code_reduce|execute_with_cancellation|'
    r'_iterator_resource|\._flatten)\b')


def test_no_other_module_reaches_into_a_private_name():
  offenders = []
  for path in (_REPO / 'repertory').rglob('*.py'):
    relative = path.relative_to(_REPO).as_posix()
    if relative.startswith('repertory/launch/process/'):
      continue
    for number, line in enumerate(path.read_text().splitlines(), 1):
      code = line.split('#', 1)[0]
      if _PRIVATE_USE.search(code):
        offenders.append(f'{relative}:{number}: {line.strip()}')
  assert not offenders, '\n'.join(offenders)
