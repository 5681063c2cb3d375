"""Loads the scripts of examples/ as modules (they are not a package)."""

import importlib.util
import os
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'examples')


def load(name: str):
  """Imports examples/<name>.py as the module `examples_<name>`."""
  module_name = f'examples_{name}'
  if module_name not in sys.modules:
    spec = importlib.util.spec_from_file_location(
        module_name, os.path.join(EXAMPLES, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
  return sys.modules[module_name]


@pytest.fixture
def load_example():
  return load


@pytest.fixture
def example_path():
  return lambda name: os.path.abspath(os.path.join(EXAMPLES, f'{name}.py'))
