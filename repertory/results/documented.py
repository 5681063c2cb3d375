"""Which rows of the results page ran a documented command.

    commands = documented.read(['docs/minatar.md', 'docs/ppo.md'])
    page = documented.source(group, commands)   # 'docs/minatar.md' or None

A documented command is a `python -m repertory.run ...` line in a shell
block of a Markdown page (`extract`: its `\\` continuations joined;
environment variables set before it left out). A row ran it when every run
of the row was started with its flags (each attempt's, or for a sweep's
trial the sweep's own command line): the same flag names with the same values,
numbers compared as numbers (a bare `--flag` as `--flag=true`) and a flag
given twice read by its last value, as absl reads it; `--seed` and
`--logdir` aside, and `--env` up to its game, so `--env=minatar:breakout`
stands for every MinAtar game (`family:game` with the same family).
"""

import os
import re
import shlex
from typing import Dict, List, Optional, Sequence, Tuple

from repertory import rundir
from repertory import sweep as sweep_lib
from repertory.results import runs as runs_lib

# Flags that differ between the runs of one documented command.
PER_RUN = ('seed', 'logdir')
_PROGRAM = 'python -m repertory.run'
# Fences of shell blocks.
_SHELL = re.compile(r'```(?:sh|bash|console|shell)?')
# A command line: environment assignments, then a program (not a listing or
# an error message that names a command).
_COMMAND = re.compile(r'(\$ )?([A-Z_]+=\S+ )*(python3? |unshare )')

Flags = Dict[str, str]


class Command:
  """A documented command: its page and its flags (`--seed`, `--logdir`
  left out)."""

  def __init__(self, page: str, flags: Flags):
    self.page, self.flags = page, flags

  def ran(self, flags: Flags) -> bool:
    """Whether a run started with `flags` ran this command."""
    mine, theirs = dict(self.flags), dict(flags)
    if not _same_task(mine.pop('env', None), theirs.pop('env', None)):
      return False
    return mine == theirs


def read(pages: Sequence[str]) -> List[Command]:
  """The documented commands of the Markdown `pages`, in their order.

  Raises:
    runs.ResultsError: a page that cannot be read (one line).
  """
  out = []
  for page in pages:
    try:
      commands = extract(page)
    except OSError as e:
      raise runs_lib.ResultsError(
          f'--documented={page}: cannot read it ({e.strerror}).') from None
    for _, command in commands:
      flags = _run_flags(command)
      if flags is not None:
        out.append(Command(page, flags))
  return out


def extract(path: str) -> List[Tuple[int, str]]:
  """(line, command) of each `python -m repertory.<module>` command of the
  Markdown file `path`, `\\`-continued lines joined (a `$ ` prompt left
  out): in fenced blocks marked as shell, or without a language when the
  block starts with a command rather than with output."""
  with open(path) as f:
    lines = f.read().splitlines()
  commands = []
  shell = None  # Inside a block: whether it holds shell commands.
  joined, first = '', None
  untagged_start = False  # The first line of a block without a language.
  for number, line in enumerate(lines, start=1):
    if line.lstrip().startswith('```'):
      shell = (_SHELL.fullmatch(line.strip()) is not None
               if shell is None else None)
      untagged_start = shell and line.strip() == '```'
      joined, first = '', None
      continue
    if not shell:
      continue
    line = line.strip()
    if untagged_start and line:
      untagged_start = False
      if not (line.startswith('#') or _COMMAND.match(line)):
        shell = False  # A block of output, not of commands.
        continue
    if first is None:
      first = number
    joined += ' ' + line.rstrip('\\').strip()
    if line.endswith('\\'):
      continue
    joined = joined.strip()
    if 'python -m repertory.' in joined and _COMMAND.match(joined):
      commands.append((first, joined[2:] if joined[:2] == '$ ' else joined))
    joined, first = '', None
  return commands


def source(group: runs_lib.Group,
           commands: Sequence[Command]) -> Optional[str]:
  """The page of the first documented command every run of `group` ran,
  or None."""
  for command in commands:
    if all(_run_ran(run, command) for run in group.runs):
      return command.page
  return None


def flags_of(argv: Sequence[str]) -> Optional[Flags]:
  """`{name: value}` of a `python -m repertory.run` argument list (its
  arguments only), the last value of a repeated flag, `PER_RUN` left out;
  None if it has a positional argument."""
  flags = {}
  for token in argv:
    if not token.startswith('--'):
      return None
    name, equals, value = token[2:].partition('=')
    flags[name] = _normal(value) if equals else 'true'  # A bare boolean.
  for name in PER_RUN:
    flags.pop(name, None)
  return flags


def _run_flags(command: str) -> Optional[Flags]:
  """`flags_of` a `python -m repertory.run` command line (what follows its
  last `&&`, environment assignments left out); None for another command."""
  try:
    words = shlex.split(command.rsplit(' && ', 1)[-1], comments=True)
  except ValueError:
    return None
  while words and re.match(r'^[A-Za-z_][A-Za-z0-9_]*=', words[0]):
    words = words[1:]
  if ' '.join(words[:3]) != _PROGRAM:
    return None
  return flags_of(words[3:])


def _run_ran(run: runs_lib.Run, command: Command) -> bool:
  started = _sweep_flags(run.path) or [
      flags_of(a['argv'][1:]) for a in run.attempts if a.get('argv')]
  return bool(started) and all(
      flags is not None and command.ran(flags) for flags in started)


def _sweep_flags(path: str) -> List[Optional[Flags]]:
  """The flags of the sweep's own command lines when `path` is a sweep's
  trial (none otherwise)."""
  sweep_file = sweep_lib.sweep_file_of(path)
  if not os.path.exists(sweep_file):
    return []
  return [_run_flags(line)
          for line in rundir.read_json(sweep_file).get('commands', [])]


def _same_task(documented: Optional[str], ran: Optional[str]) -> bool:
  if documented == ran:
    return True
  if documented is None or ran is None:
    return False
  family, colon, _ = documented.partition(':')
  return bool(colon) and ran.startswith(family + ':')


def _normal(value: str) -> str:
  """A flag's value as compared: numbers by value, booleans lower case."""
  if value.lower() in ('true', 'false'):
    return value.lower()
  try:
    return repr(float(value))
  except ValueError:
    return value
