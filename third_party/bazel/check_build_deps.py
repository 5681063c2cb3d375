"""Checks that the BUILD files match the Python imports they describe.

Reads every BUILD file of the workspace (outside .bazelignore'd folders and
nested workspaces) without running Bazel, parses the sources of each
`py_library`, `py_binary`, `py_test`, `repertory_py_test` and
`repertory_agent` (a py_library of the folder's .py files and the kit) target,
and reports:

- missing edges: a source imports a first-party module (`repertory...`,
  `tests...`) whose file belongs to a target that is not in `deps` (nor in
  the deps of a bundle in `deps`: a `py_library` without `srcs`, which
  gathers deps, like `//repertory/components:kit`);
- unused edges: a dependency none of the target's sources imports;
- layering: a component (`//repertory/components/...`) that depends on or
  imports an agent, an agent that imports a launch backend;
- orphans: a module of repertory/, examples/ or benchmarks/ in no
  `py_library`, a `*_test.py` file in no `repertory_py_test`, a
  `conftest.py` a test needs but does not depend on;
- slow tests: a test file with `@pytest.mark.slow` tests and no `slow = True`
  target, or the reverse.

A module named by a string that is exactly its dotted name
(`'repertory.agents.impala'`, imported with importlib) counts as imported, and
so do the imports of code in a string (run by a subprocess). A
dep no source imports but that is needed all the same is written
`"//a/b",  # keep`. Parent packages need no edge (Bazel writes an empty
`__init__.py` where a package's own is not in a test's runfiles).

Usage:

  python third_party/bazel/check_build_deps.py [--root DIR] [--suggest]
      [--fix] [--write_missing]

Exits 1 when it reports a problem. `--suggest` also prints, for each target
with a missing or unused edge, the `deps` it should have; `--write_missing`
first writes a BUILD file (one py_library per package folder, one
repertory_py_test per test file) into each folder that has none, and adds
rules for new test files to existing tests/ BUILD files, to review: test sizes
and tags are left at their defaults. `--fix` rewrites wrong `deps` lists. Only the standard library is
used, so it runs with any Python 3.8+.
"""

import argparse
import ast
import fnmatch
import glob as globlib
import os
import re
import sys
import textwrap
from typing import Dict, Iterable, List, Optional, Set, Tuple

# Top-level folders whose modules are first-party Bazel targets.
FIRST_PARTY = ('repertory', 'tests', 'examples', 'benchmarks',
               'third_party')
# Folders whose every module is in a py_library (one per folder).
LIBRARY_FOLDERS = ('repertory', 'examples', 'benchmarks')
PY_RULES = ('py_library', 'py_binary', 'py_test', 'repertory_py_test')
# What `repertory_agent` (repertory/agents/defs.bzl) adds to an agent's deps.
AGENT_KIT = '//repertory/components:kit'
COMPONENTS = '//repertory/components/'
AGENTS = '//repertory/agents/'
# (targets under, modules they must not import, why).
LAYERING = (
    (COMPONENTS, re.compile(r'repertory\.agents(\..*)?'),
     'a component never imports an agent'),
    (COMPONENTS, re.compile(
        r'repertory\.(run|experiment|rundir|sweep|overrides|results)(\..*)?'),
     'a component never imports a run or an experiment'),
    (AGENTS, re.compile(r'repertory\.launch\.backends(\..*)?'),
     "an agent uses only repertory.launch's public API, never a backend"),
)
ROOT = ['.']  # the workspace root main() was given
KEEP = re.compile(r'"([^"]+)"\]?,?\s*#\s*keep\b')
MODULE_NAME = re.compile(r'(%s)(\.[A-Za-z_][A-Za-z0-9_]*)+' % '|'.join(FIRST_PARTY))


class Target:
  """One Python rule read from a BUILD file."""

  def __init__(self, package: str, kind: str, name: str, srcs: List[str],
               deps: List[str], attrs: dict):
    self.package = package
    self.kind = kind
    self.name = name
    self.srcs = srcs  # workspace-relative paths of .py files
    self.deps = deps  # absolute labels
    self.attrs = attrs
    self.keep: Set[str] = set()  # deps marked `# keep` in the BUILD file

  @property
  def label(self) -> str:
    return f'//{self.package}:{self.name}'


def normalize_label(label: str, package: str) -> str:
  """`:x` -> `//pkg:x`; `//a/b` -> `//a/b:b`."""
  if label.startswith('@'):
    return label
  if label.startswith(':'):
    return f'//{package}{label}'
  if not label.startswith('//'):
    return f'//{package}:{label}'
  if ':' not in label:
    return f'{label}:{label.rsplit("/", 1)[-1]}'
  return label


def label_file(label: str) -> Optional[str]:
  """`//a/b:c.py` -> `a/b/c.py` for a file label; None otherwise."""
  if not label.startswith('//') or not label.endswith('.py'):
    return None
  package, name = label[2:].split(':', 1)
  return os.path.join(package, name) if package else name


def read_bazelignore(root: str) -> List[str]:
  path = os.path.join(root, '.bazelignore')
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [line.strip().rstrip('/') for line in f
            if line.strip() and not line.startswith('#')]


def find_build_files(root: str) -> List[str]:
  """Workspace-relative folders holding a BUILD file, as Bazel sees them."""
  ignored = set(read_bazelignore(root))
  packages = []
  for dirpath, dirnames, filenames in os.walk(root):
    rel = os.path.relpath(dirpath, root)
    rel = '' if rel == '.' else rel
    keep = []
    for d in sorted(dirnames):
      sub = os.path.join(rel, d) if rel else d
      if d.startswith('.') and d != '.ci' or d.startswith('bazel-'):
        continue
      if sub in ignored or d == '__pycache__':
        continue
      # A folder with its own WORKSPACE is another repository.
      if os.path.exists(os.path.join(root, sub, 'WORKSPACE')):
        continue
      keep.append(d)
    dirnames[:] = keep
    if 'BUILD' in filenames or 'BUILD.bazel' in filenames:
      packages.append(rel)
  return packages


def read_package(root: str, package: str) -> List[Target]:
  """Evaluates one BUILD file with stand-ins for the rules it calls."""
  pkg_dir = os.path.join(root, package)
  name = 'BUILD.bazel' if os.path.exists(
      os.path.join(pkg_dir, 'BUILD.bazel')) else 'BUILD'
  targets: List[Target] = []

  def glob(include, exclude=(), **unused_kwargs):
    found = set()
    for pattern in include:
      for path in globlib.glob(os.path.join(pkg_dir, pattern),
                               recursive=True):
        rel = os.path.relpath(path, pkg_dir)
        if os.path.isfile(path) and not any(
            fnmatch.fnmatch(rel, e) for e in exclude):
          found.add(rel)
    return sorted(found)

  def files_of(srcs: Iterable[str]) -> List[str]:
    out = []
    for src in srcs:
      if src.startswith('//') or src.startswith(':'):
        path = label_file(normalize_label(src, package))
        if path:
          out.append(path)
      elif src.endswith('.py'):
        out.append(os.path.join(package, src) if package else src)
    return out

  def make_rule(kind):
    def rule(name, srcs=(), deps=(), **attrs):
      if kind == 'repertory_py_test' and not srcs:
        srcs = [name + '.py']
      files = files_of(srcs)
      targets.append(Target(package, kind, name, files,
                            [normalize_label(d, package) for d in deps],
                            attrs))
    return rule

  def ignore(*unused_args, **unused_kwargs):
    return None

  scope = {rule: make_rule(rule) for rule in PY_RULES}

  def repertory_agent(name, deps=(), **attrs):  # //repertory/agents:defs.bzl
    scope['py_library'](name, srcs=glob(['*.py']),
                        deps=[AGENT_KIT] + list(deps), **attrs)

  scope['repertory_agent'] = repertory_agent
  scope.update(glob=glob, load=ignore, package=ignore,
               exports_files=ignore, select=lambda d: d.get(
                   '//conditions:default', []))

  class Scope(dict):
    def __missing__(self, key):  # any other rule (filegroup, sh_binary, ...)
      return ignore

  with open(os.path.join(pkg_dir, name)) as f:
    source = f.read()
  exec(compile(source, os.path.join(pkg_dir, name), 'exec'), Scope(scope))  # pylint: disable=exec-used
  # Deps written `"//a:b",  # keep` are needed though no source imports them.
  keep = {normalize_label(m.group(1), package)
          for m in KEEP.finditer(source)}
  for t in targets:
    t.keep = keep & set(t.deps)
  return targets


def module_file(root: str, module: str) -> Optional[str]:
  """`a.b.c` -> `a/b/c.py` or `a/b/c/__init__.py` if it exists."""
  base = module.replace('.', '/')
  for path in (base + '.py', base + '/__init__.py'):
    if os.path.isfile(os.path.join(root, path)):
      return path
  return None


def imported_modules(root: str, path: str) -> Set[str]:
  """First-party modules a source file imports (anywhere in the file).

  Also counts code in string constants (`subprocess.run([sys.executable,
  '-c', code])`, scripts written for a subprocess) and modules named by a
  string that is exactly their dotted name.
  """
  with open(os.path.join(root, path)) as f:
    tree = ast.parse(f.read(), path)
  package = os.path.dirname(path).replace('/', '.')
  # third_party/bazel's own tests hold BUILD and Python files as fixtures.
  strings = not path.startswith('third_party/')
  return _imports(root, tree, package.split('.') if package else [], strings)


def _imports(root: str, tree: ast.AST, package_parts: List[str],
             strings: bool = True) -> Set[str]:
  modules = set()
  for node in ast.walk(tree):
    if not strings and isinstance(node, ast.Constant):
      continue
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
      text = node.value
      if MODULE_NAME.fullmatch(text) and module_file(root, text):
        # A module imported by name (importlib.import_module(AGENTS[name])).
        modules.add(text)
      elif 'import' in text and any(p in text for p in FIRST_PARTY):
        try:  # Python code run by a subprocess.
          code = ast.parse(textwrap.dedent(text))
        except SyntaxError:
          continue
        modules |= _imports(root, code, [])
    elif isinstance(node, ast.Import):
      for alias in node.names:
        modules.add(alias.name)
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        parts = package_parts[:len(package_parts) - node.level + 1]
        base = '.'.join(parts + ([node.module] if node.module else []))
      else:
        base = node.module or ''
      for alias in node.names:
        sub = f'{base}.{alias.name}'
        modules.add(sub if module_file(root, sub) else base)
  return {m for m in modules if m.split('.')[0] in FIRST_PARTY}


def is_trivial_init(root: str, path: str) -> bool:
  """An __init__.py with only a docstring and constants (no imports).

  Bazel writes an empty __init__.py where a package's own is not in a test's
  runfiles; for such a file that changes nothing that matters.
  """
  with open(os.path.join(root, path)) as f:
    tree = ast.parse(f.read(), path)
  for node in tree.body:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
      continue
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
      continue
    return False
  return True


def slow_marks(root: str, path: str) -> Tuple[bool, bool]:
  """(has tests not marked slow, has tests marked slow) in one test file."""

  def is_slow(decorators) -> bool:
    for d in decorators:
      if isinstance(d, ast.Call):
        d = d.func
      if isinstance(d, ast.Attribute) and d.attr == 'slow':
        return True
      if isinstance(d, (ast.List, ast.Tuple)) and is_slow(d.elts):
        return True
    return False

  with open(os.path.join(root, path)) as f:
    tree = ast.parse(f.read(), path)
  module_slow = False
  for node in tree.body:
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == 'pytestmark' for t in node.targets):
      module_slow = is_slow([node.value])
  fast = slow = False

  def visit(body, inherited: bool):
    nonlocal fast, slow
    for node in body:
      if isinstance(node, ast.ClassDef):  # Test* or a unittest.TestCase
        visit(node.body, inherited or is_slow(node.decorator_list))
      elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
          node.name.startswith('test'):
        if inherited or is_slow(node.decorator_list):
          slow = True
        else:
          fast = True

  visit(tree.body, module_slow)
  return fast, slow


def load_targets(root: str) -> List[Target]:
  targets: List[Target] = []
  for package in find_build_files(root):
    targets.extend(read_package(root, package))
  return targets


def is_bundle(target: Target) -> bool:
  """A `py_library` without sources: it only gathers deps (see `check`)."""
  return target.kind == 'py_library' and not target.srcs


def check(root: str, targets: List[Target], suggest: bool = False
          ) -> Tuple[List[str], Dict[str, Set[str]]]:
  """Compares targets' deps with their imports.

  Returns one line per problem, and the deps each target's imports need.
  """
  problems = []
  by_label = {t.label: t for t in targets}
  owner: Dict[str, str] = {}
  for t in targets:
    if t.kind != 'py_library':
      continue
    for src in t.srcs:
      if src in owner and owner[src] != t.label:
        problems.append(f'{src}: in two libraries, {owner[src]} and {t.label}')
      owner[src] = t.label

  def needed_for(module: str) -> Tuple[Set[str], Optional[str]]:
    """The target providing a module.

    Parent packages need no edge: where a package's own __init__.py is not in
    the runfiles, Bazel writes an empty one, and the import still works.
    """
    path = module_file(root, module)
    if path is None:
      return set(), f'imports {module}, which has no file in the workspace'
    if path not in owner:
      if path.endswith('__init__.py') and is_trivial_init(root, path):
        return set(), None  # an empty package: Bazel writes its __init__.py
      return set(), f'imports {module}, whose file {path} is in no py_library'
    return {owner[path]}, None

  tested: Set[str] = set()
  all_needed: Dict[str, Set[str]] = {}
  for t in targets:
    needed: Set[str] = set()
    for src in t.srcs:
      if not os.path.exists(os.path.join(root, src)):
        problems.append(f'{t.label}: source {src} does not exist')
        continue
      for module in sorted(imported_modules(root, src)):
        for prefix, banned, why in LAYERING:
          if t.label.startswith(prefix) and banned.fullmatch(module):
            problems.append(f'{t.label}: {src} imports {module}: {why}')
        providers, error = needed_for(module)
        if error:
          problems.append(f'{t.label}: {src} {error}')
        needed |= providers
    if t.kind in ('py_test', 'repertory_py_test'):
      for src in t.srcs:
        tested.add(src)
        needed |= conftests_needed(root, src, owner, problems, t.label)
    needed.discard(t.label)
    declared = set(d for d in t.deps if not d.startswith('@'))
    # A py_library without srcs is a bundle: depending on it provides its
    # deps (Bazel puts them on the path), and it is used if one is needed.
    provided = {d: set(by_label[d].deps) for d in declared
                if d in by_label and is_bundle(by_label[d])}
    used_bundles = {d for d, deps in provided.items() if deps & needed}
    if is_bundle(t):
      needed = declared  # Its deps are what it is for.
    else:
      needed = (needed - set().union(*provided.values())) | used_bundles
    all_needed[t.label] = needed
    missing = sorted(needed - declared)
    unused = sorted(declared - needed - t.keep)
    for dep in missing:
      problems.append(f'{t.label}: missing dep {dep} (its sources import it)')
    for dep in unused:
      problems.append(f'{t.label}: unused dep {dep} (no source imports it; '
                      'mark it `# keep` if it is needed all the same)')
    for dep in sorted(declared | needed):
      if dep in declared and dep not in by_label:
        problems.append(f'{t.label}: dep {dep} is not a Python target here')
      if t.label.startswith(COMPONENTS) and dep.startswith(AGENTS):
        problems.append(f'{t.label}: a component must not depend on an '
                        f'agent ({dep})')
    if suggest and (missing or unused):
      lines = deps_lines(t.package, needed, declared & t.keep) or [
          '    deps = [],']
      problems.append(f'  suggested for {t.label}:\n' + '\n'.join(lines))
    if t.kind == 'repertory_py_test' and t.srcs:
      has_fast, has_slow = slow_marks(root, t.srcs[0])
      fast, slow = t.attrs.get('fast', True), t.attrs.get('slow', False)
      if has_slow and not slow:
        problems.append(f'{t.label}: {t.srcs[0]} has tests marked slow; set '
                        'slow = True so that a "<name>_slow" target runs them')
      if slow and not has_slow:
        problems.append(f'{t.label}: slow = True but {t.srcs[0]} has no test '
                        'marked slow')
      if has_fast != fast:
        problems.append(f'{t.label}: fast = {fast} but {t.srcs[0]} '
                        f'{"has" if has_fast else "has no"} tests not marked '
                        'slow')

  for top in LIBRARY_FOLDERS + ('tests',):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
      dirnames[:] = [d for d in dirnames if d != '__pycache__']
      for f in sorted(filenames):
        path = os.path.relpath(os.path.join(dirpath, f), root)
        if not f.endswith('.py'):
          continue
        if top == 'tests' and f.endswith('_test.py'):
          if path not in tested:
            problems.append(f'{path}: no repertory_py_test runs it')
        elif path not in owner and not (f == '__init__.py' and
                                        is_trivial_init(root, path)):
          if top != 'tests' or f == 'conftest.py':
            problems.append(f'{path}: in no py_library')
  return problems, all_needed


def plan_missing(root: str, targets: List[Target]) -> List[Target]:
  """Targets for folders under repertory/ and tests/ that have no BUILD file.

  One py_library per package folder (all its modules); under tests/, one
  repertory_py_test per `*_test.py` file and one py_library per other module
  (for a tests/ folder with a BUILD file, those of its files no rule names).
  """
  packages = {t.package for t in targets} | set(find_build_files(root))
  covered = {src for t in targets for src in t.srcs}
  planned = []
  for top in LIBRARY_FOLDERS + ('tests',):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
      dirnames[:] = sorted(d for d in dirnames if d != '__pycache__')
      package = os.path.relpath(dirpath, root)
      if package in packages and top != 'tests':
        continue
      py = sorted(f for f in filenames if f.endswith('.py'))
      paths = [os.path.join(package, f) for f in py]
      if package in packages:  # add what is new in a tests/ package
        py = [f for f, p in zip(py, paths) if p not in covered]
        paths = [os.path.join(package, f) for f in py]
      if not [p for p in paths if not (p.endswith('/__init__.py') and
                                       is_trivial_init(root, p))]:
        continue
      if top != 'tests':
        planned.append(Target(package, 'py_library',
                              os.path.basename(package), paths, [], {}))
        continue
      for f, path in zip(py, paths):
        if f.endswith('_test.py'):
          fast, slow = slow_marks(root, path)
          attrs = {} if fast else {'fast': False}
          if slow:
            attrs['slow'] = True
          planned.append(Target(package, 'repertory_py_test', f[:-3], [path],
                                [], attrs))
        elif not (f == '__init__.py' and is_trivial_init(root, path)):
          planned.append(Target(package, 'py_library', f[:-3], [path], [],
                                {'testonly': True}))
  return planned


def short_label(label: str, package: str) -> str:
  """`//a/b:b` -> `//a/b`; `//pkg:x` -> `:x` inside `pkg`."""
  pkg, name = label[2:].split(':')
  if pkg == package:
    return f':{name}'
  return f'//{pkg}' if pkg.rsplit('/', 1)[-1] == name else label


def deps_lines(package: str, deps: Iterable[str],
               keep: Iterable[str] = ()) -> List[str]:
  """The `deps = [...]` lines of a rule, local targets first."""
  keep = {short_label(d, package) for d in keep}
  deps = sorted({short_label(d, package) for d in deps} | keep,
                key=lambda d: (not d.startswith(':'), d.split(':')))
  if not deps:
    return []
  if len(deps) == 1 and not keep:
    return [f'    deps = ["{deps[0]}"],']
  return (['    deps = ['] +
          [f'        "{d}",{"  # keep" if d in keep else ""}' for d in deps] +
          ['    ],'])


def fix_deps(root: str, target: Target, needed: Set[str]) -> bool:
  """Rewrites one rule's `deps` in its BUILD file to `needed` (+ `# keep`).

  Handles rules formatted as buildifier writes them (one attribute a line,
  the closing parenthesis alone on a line); returns False for others.
  """
  path = os.path.join(root, target.package, 'BUILD')
  with open(path) as f:
    lines = f.read().split('\n')
  name_line = next((i for i, line in enumerate(lines)
                    if re.fullmatch(rf'\s*name = "{target.name}",', line)),
                   None)
  if name_line is None:
    return False
  start = max(i for i in range(name_line + 1) if re.match(r'\w+\(', lines[i]))
  end = next(i for i in range(name_line, len(lines)) if lines[i] == ')')
  body = lines[start + 1:end]
  new = deps_lines(target.package, needed, target.keep)
  for i, line in enumerate(body):
    if line.startswith('    deps = ['):
      j = i if line.rstrip().endswith('],') else next(
          k for k in range(i, len(body)) if body[k] == '    ],')
      body[i:j + 1] = new
      break
  else:
    body += new
  lines[start + 1:end] = body
  with open(path, 'w') as f:
    f.write('\n'.join(lines))
  return True


def render_build(package: str, targets: List[Target],
                 needed: Dict[str, Set[str]], header: bool = True) -> str:
  """BUILD rules for planned targets (sizes and tags are left to review)."""
  lines = []
  init = os.path.join(package, '__init__.py')
  if not header:
    pass
  elif os.path.exists(os.path.join(ROOT[0], init)):
    with open(os.path.join(ROOT[0], init)) as f:
      doc = ast.get_docstring(ast.parse(f.read()))
    if doc:  # the package docstring's first paragraph
      summary = ' '.join(doc.split('\n\n')[0].split())
      lines += ['# ' + l for l in textwrap.wrap(summary, 77)] + ['']
  if header and any(t.kind == 'repertory_py_test' for t in targets):
    lines += ['load("//third_party/bazel:defs.bzl", "repertory_py_test")', '']
  if header and any(t.kind == 'py_library' and not t.attrs.get('testonly')
                    for t in targets):
    lines += ['package(default_visibility = ["//visibility:public"])', '']
  for t in targets:
    if t.kind == 'py_library' and not package.startswith('tests'):
      lines += ['py_library(', f'    name = "{t.name}",',
                '    srcs = glob(["*.py"]),', '    srcs_version = "PY3",']
    elif t.kind == 'py_library':
      lines += ['py_library(', f'    name = "{t.name}",', '    testonly = True,',
                f'    srcs = ["{os.path.basename(t.srcs[0])}"],',
                '    srcs_version = "PY3",']
    else:
      lines += ['repertory_py_test(', f'    name = "{t.name}",']
      for key in ('fast', 'slow'):
        if key in t.attrs:
          lines.append(f'    {key} = {t.attrs[key]},')
    lines += deps_lines(package, needed.get(t.label, ())) + [')', '']
  return '\n'.join(lines)


def conftests_needed(root: str, test_file: str, owner: Dict[str, str],
                     problems: List[str], label: str) -> Set[str]:
  """Libraries holding the conftest.py files pytest loads for a test file."""
  needed = set()
  folder = os.path.dirname(test_file)
  while folder:
    conftest = os.path.join(folder, 'conftest.py')
    if os.path.exists(os.path.join(root, conftest)):
      if conftest in owner:
        needed.add(owner[conftest])
      else:
        problems.append(f'{label}: pytest loads {conftest}, which is in no '
                        'py_library')
    folder = os.path.dirname(folder)
  return needed


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
      '--root', default=os.environ.get('BUILD_WORKSPACE_DIRECTORY') or
      os.path.dirname(os.path.dirname(os.path.dirname(
          os.path.abspath(__file__)))),
      help='the workspace root (default: this repository)')
  parser.add_argument('--suggest', action='store_true',
                      help='print the deps each wrong target should have')
  parser.add_argument('--fix', action='store_true',
                      help='rewrite the deps of each target with a missing '
                      'or unused edge to match its imports')
  parser.add_argument('--write_missing', action='store_true',
                      help='write a BUILD file, for review, into each folder '
                      'of repertory/, examples/, benchmarks/ and tests/ with '
                      'Python files and none')
  args = parser.parse_args(argv)
  ROOT[0] = args.root
  targets = load_targets(args.root)
  if args.write_missing:
    planned = plan_missing(args.root, targets)
    _, needed = check(args.root, targets + planned)
    existing = set(find_build_files(args.root))
    for package in sorted({t.package for t in planned}):
      path = os.path.join(args.root, package, 'BUILD')
      new = [t for t in planned if t.package == package]
      if package in existing:
        with open(path) as f:
          text = f.read().rstrip('\n') + '\n\n'
        with open(path, 'w') as f:
          f.write(text + render_build(package, new, needed, header=False))
        print(f'added {", ".join(t.name for t in new)} to {path}')
      else:
        with open(path, 'w') as f:
          f.write(render_build(package, new, needed))
        print(f'wrote {path}')
    targets = load_targets(args.root)
  if args.fix:
    _, needed = check(args.root, targets)
    for t in targets:
      declared = {d for d in t.deps if not d.startswith('@')}
      if t.label in needed and declared != needed[t.label] | t.keep:
        if fix_deps(args.root, t, needed[t.label]):
          print(f'fixed deps of {t.label}')
        else:
          print(f'could not fix {t.label}: format its BUILD file one '
                'attribute a line')
    targets = load_targets(args.root)
  problems, _ = check(args.root, targets, suggest=args.suggest)
  for line in problems:
    print(line)
  count = sum(1 for p in problems if not p.startswith('  '))
  if count:
    print(f'check_build_deps: {count} problem(s) in BUILD files under '
          f'{args.root}', flush=True)
    return 1
  print(f'check_build_deps: BUILD deps match the imports under {args.root}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
