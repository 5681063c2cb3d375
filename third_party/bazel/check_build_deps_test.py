"""Tests of the BUILD dependency checker on small workspaces written to disk."""

import os
import textwrap

from third_party.bazel import check_build_deps

_TEST_MACRO = 'load("//third_party/bazel:defs.bzl", "repertory_py_test")\n'


def _write(root, files):
  for path, text in files.items():
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'w') as f:
      f.write(textwrap.dedent(text))


def _workspace(tmp_path, **overrides):
  """A workspace with a core module, a loss, an agent and their tests."""
  files = {
      'WORKSPACE': 'workspace(name = "repertory")\n',
      'repertory/__init__.py': '"""The package."""\n',
      'repertory/core.py': 'import abc\n',
      'repertory/BUILD': '''
          py_library(name = "core", srcs = ["__init__.py", "core.py"])
          ''',
      'repertory/components/__init__.py': '',
      'repertory/components/losses/__init__.py':
          'from repertory.components.losses.vtrace import vtrace\n',
      'repertory/components/losses/vtrace.py': '''
          from repertory import core

          def vtrace():
            pass
          ''',
      'repertory/components/losses/BUILD': '''
          py_library(
              name = "losses",
              srcs = glob(["*.py"]),
              deps = ["//repertory:core"],
          )
          ''',
      'repertory/agents/__init__.py': '''
          import importlib
          AGENTS = {'impala': 'repertory.agents.impala'}
          ''',
      'repertory/agents/BUILD': '''
          py_library(
              name = "agents",
              srcs = glob(["*.py"]),
              deps = ["//repertory/agents/impala"],
          )
          ''',
      'repertory/agents/impala/__init__.py': '''
          from repertory.components import losses
          ''',
      'repertory/agents/impala/BUILD': '''
          py_library(
              name = "impala",
              srcs = glob(["*.py"]),
              deps = ["//repertory/components/losses"],
          )
          ''',
      'tests/components/losses/vtrace_test.py': '''
          import pytest
          from repertory.components.losses import vtrace

          def test_fast():
            pass

          @pytest.mark.slow
          def test_learns():
            pass
          ''',
      'tests/components/losses/BUILD': _TEST_MACRO + textwrap.dedent('''
          repertory_py_test(
              name = "vtrace_test",
              slow = True,
              deps = ["//repertory/components/losses"],
          )
          '''),
  }
  files.update(overrides)
  _write(str(tmp_path), files)
  return str(tmp_path)


def _problems(root):
  problems, _ = check_build_deps.check(root,
                                       check_build_deps.load_targets(root))
  return problems


def test_a_matching_workspace_has_no_problems(tmp_path):
  assert _problems(_workspace(tmp_path)) == []


def test_a_missing_edge_is_reported(tmp_path):
  root = _workspace(tmp_path, **{'repertory/components/losses/BUILD': '''
      py_library(name = "losses", srcs = glob(["*.py"]))
      '''})
  assert _problems(root) == [
      '//repertory/components/losses:losses: missing dep //repertory:core '
      '(its sources import it)'
  ]


def test_an_unused_edge_is_reported_unless_kept(tmp_path):
  build = '''
      py_library(
          name = "impala",
          srcs = glob(["*.py"]),
          deps = [
              "//repertory:core"{keep}
              "//repertory/components/losses",
          ],
      )
      '''
  root = _workspace(tmp_path, **{
      'repertory/agents/impala/BUILD': build.format(keep=',')})
  assert len(_problems(root)) == 1
  assert 'unused dep //repertory:core' in _problems(root)[0]
  _write(root, {'repertory/agents/impala/BUILD': build.format(
      keep=',  # keep')})
  assert _problems(root) == []


def test_a_bundle_provides_its_deps_and_is_used_through_them(tmp_path):
  kit = {'repertory/components/BUILD': '''
      py_library(name = "kit", deps = ["//repertory/components/losses"])
      '''}
  impala = '\n'.join([
      'py_library(', '    name = "impala",', '    srcs = glob(["*.py"]),',
      '    deps = [{deps}],', ')'])
  root = _workspace(tmp_path, **kit, **{
      'repertory/agents/impala/BUILD': impala.format(
          deps='"//repertory/components:kit"')})
  assert _problems(root) == []
  # Listing a dep the bundle provides as well is an unused edge.
  _write(root, {'repertory/agents/impala/BUILD': impala.format(
      deps='"//repertory/components:kit", "//repertory/components/losses"')})
  assert _problems(root) == [
      '//repertory/agents/impala:impala: unused dep '
      '//repertory/components/losses:losses (no source imports it; mark it '
      '`# keep` if it is needed all the same)']
  # A bundle none of whose deps is imported is unused.
  _write(root, {'repertory/agents/impala/__init__.py': 'import os\n'})
  _write(root, {'repertory/agents/impala/BUILD': impala.format(
      deps='"//repertory/components:kit"')})
  assert _problems(root) == [
      '//repertory/agents/impala:impala: unused dep '
      '//repertory/components:kit (no source imports it; mark it `# keep` if '
      'it is needed all the same)']


def test_an_agent_macro_target_depends_on_the_kit(tmp_path):
  root = _workspace(tmp_path, **{
      'repertory/components/BUILD': '''
          py_library(name = "kit", deps = ["//repertory/components/losses"])
          ''',
      'repertory/agents/impala/BUILD': '''
          load("//repertory/agents:defs.bzl", "repertory_agent")

          repertory_agent(name = "impala")
          '''})
  assert _problems(root) == []
  _write(root, {'repertory/agents/impala/__init__.py':
                    'from repertory import core\n'})
  assert _problems(root) == [
      '//repertory/agents/impala:impala: missing dep //repertory:core '
      '(its sources import it)',
      '//repertory/agents/impala:impala: unused dep //repertory/components:kit'
      ' (no source imports it; mark it `# keep` if it is needed all the same)']


def test_a_module_named_by_string_is_a_dependency(tmp_path):
  root = _workspace(tmp_path, **{'repertory/agents/BUILD': '''
      py_library(name = "agents", srcs = glob(["*.py"]))
      '''})
  assert _problems(root) == [
      '//repertory/agents:agents: missing dep //repertory/agents/impala:impala '
      '(its sources import it)'
  ]


def test_a_component_importing_an_agent_is_reported(tmp_path):
  root = _workspace(tmp_path, **{
      'repertory/components/losses/vtrace.py':
          'from repertory import core\nfrom repertory.agents import impala\n',
      'repertory/components/losses/BUILD': '''
          py_library(
              name = "losses",
              srcs = glob(["*.py"]),
              deps = ["//repertory:core", "//repertory/agents/impala"],
          )
          ''',
  })
  problems = _problems(root)
  assert any('a component never imports an agent' in p for p in problems)
  assert any('a component must not depend on an agent' in p for p in problems)


def test_slow_tests_need_a_slow_target(tmp_path):
  root = _workspace(tmp_path, **{
      'tests/components/losses/BUILD': _TEST_MACRO + textwrap.dedent('''
          repertory_py_test(
              name = "vtrace_test",
              deps = ["//repertory/components/losses"],
          )
          ''')})
  assert _problems(root) == [
      '//tests/components/losses:vtrace_test: '
      'tests/components/losses/vtrace_test.py has tests marked slow; set '
      'slow = True so that a "<name>_slow" target runs them'
  ]


def test_files_in_no_target_are_reported(tmp_path):
  root = _workspace(tmp_path, **{
      'repertory/launch/program.py': 'import threading\n',
      'tests/launch/program_test.py': 'def test_x():\n  pass\n',
  })
  assert sorted(_problems(root)) == [
      'repertory/launch/program.py: in no py_library',
      'tests/launch/program_test.py: no repertory_py_test runs it',
  ]


def test_write_missing_and_fix_make_the_workspace_match(tmp_path):
  root = _workspace(tmp_path, **{
      'repertory/launch/__init__.py': '"""Programs."""\n',
      'repertory/launch/program.py': 'from repertory import core\n',
      'tests/launch/program_test.py': '''
          from repertory.launch import program

          def test_x():
            pass
          ''',
      'repertory/components/losses/BUILD': '''
          py_library(
              name = "losses",
              srcs = glob(["*.py"]),
          )
          ''',
  })
  assert check_build_deps.main(
      ['--root', root, '--write_missing', '--fix']) == 0
  assert _problems(root) == []
  with open(os.path.join(root, 'tests/launch/BUILD')) as f:
    assert '"//repertory/launch"' in f.read()
  with open(os.path.join(root, 'repertory/components/losses/BUILD')) as f:
    assert 'deps = ["//repertory:core"],' in f.read()


def test_code_run_in_a_subprocess_is_checked_too(tmp_path):
  root = _workspace(tmp_path, **{
      'tests/launch/import_test.py': """
          import subprocess
          import sys

          def test_import():
            code = '''
                import sys
                from repertory.components import losses
            '''
            subprocess.run([sys.executable, '-c', code], check=True)
          """,
      'tests/launch/BUILD': _TEST_MACRO + textwrap.dedent('''
          repertory_py_test(
              name = "import_test",
          )
          '''),
  })
  assert _problems(root) == [
      '//tests/launch:import_test: missing dep '
      '//repertory/components/losses:losses (its sources import it)'
  ]
