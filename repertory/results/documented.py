"""Which rows of the results page ran a documented command.

    commands = documented.read(['docs/minatar.md', 'docs/ppo.md'])
    page = documented.source(group, commands)   # 'docs/minatar.md' or None

A documented command is a `python -m repertory.run ...` line in a fenced
block of a Markdown page (its `\\` continuations joined; environment
variables set before it left out). A row ran it when every run of the row
was started with its flags (each attempt's, or for a sweep's trial the
sweep's own command line): the same flag names with the same values,
numbers compared as numbers (a bare `--flag` as `--flag=true`) and a flag
given twice read by its last value, as absl reads it; `--seed` and
`--logdir` aside, and `--env` up to its game, so `--env=minatar:breakout`
stands for every MinAtar game (`family:game` with the same family).
"""

import os
import re
import shlex
from typing import Dict, List, Optional, Sequence

from repertory import rundir
from repertory import sweep as sweep_lib
from repertory.results import runs as runs_lib

# Flags that differ between the runs of one documented command.
PER_RUN = ('seed', 'logdir')
_FENCE = re.compile(r'^\s*```')
_PROGRAM = ('python', '-m', 'repertory.run')

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
      with open(page) as f:
        text = f.read()
    except OSError as e:
      raise runs_lib.ResultsError(
          f'--documented={page}: cannot read it ({e.strerror}).') from None
    out += [Command(page, flags) for flags in _commands(text)]
  return out


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


def _commands(text: str) -> List[Flags]:
  out, fenced, pending = [], False, ''
  for line in text.splitlines():
    if _FENCE.match(line):
      fenced, pending = not fenced, ''
      continue
    if not fenced:
      continue
    pending += line.rstrip()
    if pending.endswith('\\'):
      pending = pending[:-1] + ' '
      continue
    flags = _flags_of_line(pending)
    pending = ''
    if flags is not None:
      out.append(flags)
  return out


def _flags_of_line(line: str) -> Optional[Flags]:
  try:
    words = shlex.split(line, comments=True)
  except ValueError:
    return None
  while words and re.match(r'^[A-Z_][A-Z0-9_]*=', words[0]):
    words = words[1:]
  if tuple(words[:3]) != _PROGRAM:
    return None
  return flags_of(words[3:])


def _run_ran(run: runs_lib.Run, command: Command) -> bool:
  argvs = _sweep_argvs(run.path) or [
      a['argv'][1:] for a in run.attempts if a.get('argv')]
  if not argvs:
    return False
  for argv in argvs:
    flags = flags_of(argv)
    if flags is None or not command.ran(flags):
      return False
  return True


def _sweep_argvs(path: str) -> List[List[str]]:
  """The sweep's own argument lists when `path` is a sweep's trial."""
  sweep_file = sweep_lib.sweep_file_of(path)
  if not os.path.exists(sweep_file):
    return []
  lines = rundir.read_json(sweep_file).get('commands', [])
  out = []
  for line in lines:
    words = shlex.split(line)
    if tuple(words[:3]) == _PROGRAM:
      out.append(words[3:])
  return out


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
