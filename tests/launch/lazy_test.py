"""`launch.lazy`: a callable named by its path, imported on first call."""

import pickle
import subprocess
import sys
import textwrap

import cloudpickle
import pytest

from repertory import launch


def test_call_imports_the_module_and_forwards_arguments():
  ref = launch.lazy('os.path:join')
  assert ref('a', 'b') == 'a/b'
  assert ref.__name__ == 'join'
  assert repr(ref) == "launch.lazy('os.path:join')"


def test_dotted_names_reach_methods_of_classes():
  ref = launch.lazy('collections:OrderedDict.fromkeys')
  assert list(ref('ab')) == ['a', 'b']
  assert ref.__name__ == 'fromkeys'


@pytest.mark.parametrize('dumps', [pickle.dumps, cloudpickle.dumps])
def test_pickles_as_its_path_and_unpickling_imports_nothing(dumps):
  # `fractions` is not imported by this script until the reference is
  # called: the payload names it, unpickling does not import it.
  payload = dumps(launch.lazy('fractions:Fraction'))
  code = textwrap.dedent(f'''
      import pickle, sys
      ref = pickle.loads({payload!r})
      print('BEFORE', 'fractions' in sys.modules)
      print('VALUE', ref(1, 3))
      print('AFTER', 'fractions' in sys.modules)
  ''')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=60, check=False)
  assert result.returncode == 0, result.stderr
  assert 'BEFORE False' in result.stdout, result.stdout
  assert 'VALUE 1/3' in result.stdout, result.stdout
  assert 'AFTER True' in result.stdout, result.stdout


def test_equal_references_compare_equal():
  assert launch.lazy('os:getcwd') == launch.lazy('os:getcwd')
  assert launch.lazy('os:getcwd') != launch.lazy('os:getpid')
  assert len({launch.lazy('os:getcwd'), launch.lazy('os:getcwd')}) == 1


def test_a_path_without_a_name_is_refused_with_the_form():
  with pytest.raises(ValueError, match=r"'module:name', got 'os.path.join'"):
    launch.lazy('os.path.join')


def test_a_missing_name_fails_on_call_naming_module_and_name():
  ref = launch.lazy('os.path:no_such_function')
  with pytest.raises(AttributeError,
                     match=r"'os.path' has no 'no_such_function'"):
    ref()


def test_a_node_built_from_a_lazy_reference_is_labelled_by_its_name():
  program = launch.Program('p')
  program.add_node(launch.CourierNode(launch.lazy('collections:Counter')))
  assert list(program.groups) == ['counter']


def test_lazy_attributes_import_each_module_on_first_use():
  code = ('import sys, types\n'
          'from repertory import launch\n'
          "package = types.ModuleType('pkg')\n"
          "package.__getattr__ = launch.lazy_attributes('pkg', "
          "{'Fraction': 'fractions'})\n"
          "print('BEFORE', 'fractions' in sys.modules)\n"
          "print('VALUE', package.Fraction(2, 4))\n"
          "print('AFTER', 'fractions' in sys.modules)\n"
          'try:\n'
          '  package.unknown\n'
          'except AttributeError as e:\n'
          "  print('ERROR', e)\n")
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=60, check=False)
  assert result.returncode == 0, result.stderr
  assert 'BEFORE False' in result.stdout, result.stdout
  assert 'VALUE 1/2' in result.stdout, result.stdout
  assert 'AFTER True' in result.stdout, result.stdout
  assert "ERROR module 'pkg' has no attribute 'unknown'" in result.stdout


def test_agent_packages_resolve_their_lazy_names():
  from repertory.agents import apex  # pylint: disable=g-import-not-at-top
  from repertory.agents.apex import program  # pylint: disable=g-import-not-at-top
  assert apex.make_program is program.make_program
  with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
    apex.nothing  # pylint: disable=pointless-statement
