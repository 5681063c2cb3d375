"""Keeping what the results page reads from each run, apart from the runs.

A run directory holds checkpoints and replay (hundreds of MB); the page
reads only its small files: `config.json`, `counts.json`, `results.json`,
`progress.csv`, each attempt's record, and for bsuite's experiments the
`episodes.csv` its score is computed from, and a sweep's `sweep.json` (its
command lines). `keep` copies those into a folder
(for instance one committed beside the page), so the page can be rebuilt
from that folder alone after the run directories are gone, and runs from
several machines add up in one place.
"""

import os
import shutil
from typing import Any, Dict, List, Sequence, Tuple

from repertory import plot
from repertory import rundir
from repertory import sweep
from repertory.results import bsuite
from repertory.results import runs as runs_lib

# The files of a run directory that the page reads, and of each attempt.
RUN_FILES = (rundir.CONFIG, rundir.COUNTS, rundir.RESULTS, plot.PROGRESS_FILE)
ATTEMPT_FILES = (rundir.ATTEMPT, rundir.CONFIG, rundir.RESULTS)
# Records whose absolute paths are made relative to the working directory.
PATH_RECORDS = (rundir.CONFIG, rundir.ATTEMPT)


def keep(paths: Sequence[str], folder: str) -> List[Tuple[str, str]]:
  """Copies the page's files of each finished run under `paths` into
  `folder`; returns (run directory, its copy) for each one copied.

  A run keeps its path below the argument it was found under (a run
  directory given itself keeps its name). A copy already in `folder` is
  brought up to date when it is the same run (the same first attempt),
  resumed or extended since. Raises `ResultsError`, before copying
  anything, when two runs would share a name or a copy in `folder` is of
  another run.
  """
  finished, _ = runs_lib.find_runs(paths)
  plan: Dict[str, str] = {}
  for path in finished:
    if _inside(path, folder):
      continue  # Already kept.
    target = os.path.join(folder, _name(path, paths))
    if target in plan:
      raise runs_lib.ResultsError(
          f'{plan[target]} and {path} would both be kept as {target}; pass '
          'their folders separately or rename one.')
    plan[target] = path
    if os.path.exists(target) and _first_start(target) != _first_start(path):
      raise runs_lib.ResultsError(
          f'{target} holds another run than {path} (its first attempt '
          'started at another time); remove it or rename the run directory.')
  for target, path in sorted(plan.items()):
    _copy_run(path, target)
  for target, path in sorted(plan.items()):
    _keep_sweep_commands(path, target, folder)
  return [(path, target) for target, path in sorted(plan.items())]


def _name(path: str, paths: Sequence[str]) -> str:
  """`path` relative to the argument it was found under."""
  for given in paths:
    given = os.path.normpath(given)
    if path == given:
      return os.path.basename(os.path.abspath(path))
    if _inside(path, given):
      return os.path.relpath(path, given)
  raise AssertionError(f'{path} is under none of {paths}')


def _inside(path: str, folder: str) -> bool:
  folder = os.path.abspath(folder) + os.sep
  return os.path.abspath(path).startswith(folder)


def _first_start(logdir: str) -> object:
  numbers = rundir.attempts(logdir)
  if not numbers:
    return None
  record = rundir.read_json(os.path.join(
      logdir, rundir.ATTEMPTS, str(numbers[0]), rundir.ATTEMPT))
  return record.get('started')


def _copy_run(source: str, target: str) -> None:
  """Writes the copy beside `target`, then swaps it in."""
  fresh = target + '.new'
  shutil.rmtree(fresh, ignore_errors=True)
  os.makedirs(fresh)
  env = rundir.check_run_files(source)['experiment'].get('env')
  names = RUN_FILES + ((bsuite.EPISODES_FILE,) if bsuite.bsuite_id(env)
                       else ())
  for name in names:
    if os.path.exists(os.path.join(source, name)):
      _copy_file(os.path.join(source, name), os.path.join(fresh, name))
  for number in rundir.attempts(source):
    attempt = os.path.join(rundir.ATTEMPTS, str(number))
    os.makedirs(os.path.join(fresh, attempt))
    for name in ATTEMPT_FILES:
      if os.path.exists(os.path.join(source, attempt, name)):
        _copy_file(os.path.join(source, attempt, name),
                   os.path.join(fresh, attempt, name))
  if os.path.exists(target):
    old = target + '.old'
    shutil.rmtree(old, ignore_errors=True)
    os.replace(target, old)
    os.replace(fresh, target)
    shutil.rmtree(old)
  else:
    os.replace(fresh, target)


def _keep_sweep_commands(run: str, copy: str, folder: str) -> None:
  """Adds the command lines of the sweep `run` belongs to (its
  `sweep.json`, two folders up) to its copy's sweep folder, when that
  folder is `folder` or inside it."""
  source, target = sweep.sweep_file_of(run), sweep.sweep_file_of(copy)
  sweep_copy = os.path.dirname(target)
  within = (os.path.abspath(sweep_copy) == os.path.abspath(folder)
            or _inside(sweep_copy, folder))
  if not os.path.exists(source) or not within:
    return
  commands = (rundir.read_json(target).get('commands', [])
              if os.path.exists(target) else [])
  for command in rundir.read_json(source).get('commands', []):
    if command not in commands:
      commands.append(command)
  rundir.write_json(target, {'commands': commands})


def _copy_file(source: str, target: str) -> None:
  if os.path.basename(source) not in PATH_RECORDS:
    shutil.copyfile(source, target)
    return
  rundir.write_json(target, relative_paths(rundir.read_json(source),
                                           os.getcwd()))


def relative_paths(value: Any, root: str) -> Any:
  """`value` (parsed JSON) with every string that is an absolute path under
  `root` made relative to it."""
  if isinstance(value, dict):
    return {key: relative_paths(item, root) for key, item in value.items()}
  if isinstance(value, list):
    return [relative_paths(item, root) for item in value]
  if isinstance(value, str) and value.startswith(
      os.path.join(os.path.abspath(root), '')):
    return os.path.relpath(value, root)
  return value
