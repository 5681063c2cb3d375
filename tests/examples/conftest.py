"""Loads the scripts of examples/ as modules (they are not a package)."""

import os

import pytest

from repertory import testing

EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'examples')


def load(name: str):
  """Imports examples/<name>.py as the module `examples_<name>`."""
  return testing.import_script(os.path.join(EXAMPLES, f'{name}.py'),
                               f'examples_{name}')


@pytest.fixture
def load_example():
  return load


@pytest.fixture
def example_path():
  return lambda name: os.path.abspath(os.path.join(EXAMPLES, f'{name}.py'))
