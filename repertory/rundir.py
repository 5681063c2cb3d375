"""The run directory: what a run checks before it starts, and its attempts.

    warnings = rundir.preflight(logdir, saved)   # raises RunDirError
    attempt = rundir.start_attempt(logdir, saved)
    ...                                          # launch the program
    results = attempt.end()                      # None: no results this time

A run directory holds one run, trained over one or more *attempts* (each
`python -m repertory.run` on it). What is where:

    config.json            settings of the latest attempt
    counts.json            step counts, continued across attempts
    checkpoints/latest/    the learner's rotating checkpoints (model store)
    checkpoints/unreadable/  checkpoints set aside because they were unreadable
    results.json           results of the latest attempt that finished
    attempts/<n>/          attempt n (1, 2, ...): attempt.json (start, end,
                           command line, CPU cores and load average at the
                           start, status, counts), config.json, and results.json
                           if it finished; never rewritten by a later attempt

`preflight` refuses, with one line naming the path, a `--logdir` that is a
file or cannot be written, a directory holding run files without a
`config.json`, a corrupt `config.json` or `counts.json`, checkpoints none of
which is readable, and a finished run whose budget is not raised. It warns
when there are far more actor processes than cores.
"""

import dataclasses
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

CONFIG = 'config.json'
COUNTS = 'counts.json'
RESULTS = 'results.json'
ATTEMPTS = 'attempts'
ATTEMPT = 'attempt.json'
CHECKPOINTS = 'checkpoints'
# Files and folders only a run writes: their presence makes a run directory.
RUN_FILES = (COUNTS, RESULTS, ATTEMPTS, CHECKPOINTS)
# More actor processes than this many per core make little progress.
ACTORS_PER_CORE = 4


class RunDirError(ValueError):
  """A run directory that cannot be used; the message is one line."""


def read_json(path: str, expect: type = dict) -> Any:
  """Reads a run file; a corrupt one raises `RunDirError` naming it."""
  try:
    with open(path) as f:
      value = json.load(f)
  except (OSError, UnicodeDecodeError) as e:
    raise RunDirError(f'Cannot read {path}: {_reason(e)}.') from None
  except json.JSONDecodeError as e:
    raise RunDirError(
        f'{path} is truncated or corrupt ({e.msg}: line {e.lineno} column '
        f'{e.colno}); restore it from a backup or choose another --logdir.'
    ) from None
  if not isinstance(value, expect):
    raise RunDirError(f'{path} holds a {type(value).__name__}, not a '
                      f'{expect.__name__}: not a file of a repertory run.')
  return value


def check_writable(logdir: str) -> None:
  """Creates `logdir` if needed and checks a file can be written in it."""
  if os.path.exists(logdir) and not os.path.isdir(logdir):
    raise RunDirError(f'--logdir {logdir} is an existing file, not a '
                      'directory; choose a directory path.')
  try:
    os.makedirs(logdir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=logdir, prefix='.write-test-'):
      pass
  except OSError as e:
    where = e.filename if isinstance(e.filename, str) else logdir
    raise RunDirError(f'--logdir {logdir} is not writable: {where}: '
                      f'{_reason(e)}.') from None


def read_counts(logdir: str) -> Dict[str, float]:
  """`counts.json` ({} if absent); a corrupt one raises `RunDirError`."""
  path = os.path.join(logdir, COUNTS)
  if not os.path.exists(path):
    return {}
  counts = read_json(path)
  bad = [k for k, v in counts.items()
         if isinstance(v, bool) or not isinstance(v, (int, float))]
  if bad:
    raise RunDirError(f'{path} is corrupt: {sorted(bad)} are not numbers; '
                      'restore it from a backup or choose another --logdir.')
  return counts


def check_run_files(logdir: str) -> Optional[Dict[str, Any]]:
  """The saved config of the run in `logdir` (None for a new run).

  Raises `RunDirError` for a corrupt `config.json` or `counts.json`, or run
  files without a `config.json`.
  """
  path = os.path.join(logdir, CONFIG)
  if not os.path.exists(path):
    found = [name for name in RUN_FILES
             if os.path.exists(os.path.join(logdir, name))]
    if found:
      raise RunDirError(
          f'{logdir} is not a valid run directory: it holds {found} but no '
          f'{CONFIG}; restore {path} or choose another --logdir.')
    return None
  saved = read_json(path)
  for key in ('agent', 'experiment'):
    if not isinstance(saved.get(key), dict):
      raise RunDirError(f'{path} is corrupt: no "{key}" settings; restore it '
                        'from a backup or choose another --logdir.')
  read_counts(logdir)
  return saved


def check_checkpoints(logdir: str) -> None:
  """Refuses a run whose learner checkpoints are all unreadable."""
  directory = os.path.join(logdir, CHECKPOINTS)
  if not os.path.isdir(os.path.join(directory, 'latest')):
    return
  from repertory.components import model_store  # pylint: disable=g-import-not-at-top
  try:
    model_store.ModelStore(directory, {}).latest()
  except model_store.CheckpointError as e:
    raise RunDirError(str(e)) from None


def attempts(logdir: str) -> List[int]:
  """The numbers of the attempts recorded in `logdir`, in order."""
  folder = os.path.join(logdir, ATTEMPTS)
  if not os.path.isdir(folder):
    return []
  return sorted(int(name) for name in os.listdir(folder) if name.isdigit())


def _attempt_dir(logdir: str, number: int) -> str:
  return os.path.join(logdir, ATTEMPTS, str(number))


def finished(logdir: str) -> Optional[Tuple[str, int]]:
  """(results path, budget) if the latest attempt finished, else None.

  A directory without recorded attempts (written before attempts were kept)
  counts as finished if it has a `results.json`.
  """
  numbers = attempts(logdir)
  if numbers:
    folder = _attempt_dir(logdir, numbers[-1])
    results = os.path.join(folder, RESULTS)
    config = os.path.join(folder, CONFIG)
  else:
    results = os.path.join(logdir, RESULTS)
    config = os.path.join(logdir, CONFIG)
  if not os.path.exists(results):
    return None
  budget = 0
  if os.path.exists(config):
    budget = int(read_json(config).get('experiment', {}).get(
        'max_actor_steps', 0))
  return results, budget


def check_budget(logdir: str, max_actor_steps: int) -> None:
  """Refuses to rerun a finished run unless its budget is raised above both
  its old budget and the actor steps already taken."""
  steps = int(read_counts(logdir).get('actor_steps', 0))
  done = finished(logdir)
  budget = done[1] if done else 0
  if steps < max_actor_steps and (done is None or max_actor_steps > budget):
    return
  if done is not None:
    what = (f'finished (results in {done[0]}) after {steps} actor steps of '
            f'a --max_actor_steps={budget} budget')
  else:
    what = (f'already took {steps} actor steps, the whole '
            f'--max_actor_steps={max_actor_steps} budget')
  raise RunDirError(
      f'The run in {logdir} {what}; to train it further, rerun with a larger '
      f'budget, e.g. --max_actor_steps={max(steps, budget) * 2} (and '
      '--stop_at_return=never if it stopped at its target return), or '
      'choose another --logdir.')


def oversubscription(num_actors: int, envs_per_actor: int, launch_type: str,
                     cores: Optional[int] = None,
                     processes: Optional[int] = None) -> Optional[str]:
  """A warning if actors outnumber this machine's cores more than
  `ACTORS_PER_CORE` times (local launch types only), naming what to do.
  `processes`: how many processes local_mp's actors run in (default: one
  each)."""
  cores = cores or os.cpu_count() or 1
  if launch_type not in ('local_mp', 'local_mt') or (
      num_actors <= ACTORS_PER_CORE * cores):
    return None
  envs = num_actors * envs_per_actor
  processes = num_actors if processes is None else processes
  if launch_type == 'local_mt':
    kind = 'actor threads'
  elif processes >= num_actors:
    kind = 'actor processes'
  else:
    kind = (f'actors (threads of {processes} '
            f'process{"" if processes == 1 else "es"})')
  advice = (f'step the same {envs} environments with fewer actors, e.g. '
            f'--num_actors={cores} --envs_per_actor={-(-envs // cores)}')
  if launch_type == 'local_mp' and processes > 1:
    advice += (', or run the actors as threads of one process '
               '(--actor_processes=1)')
  return (f'--num_actors={num_actors} starts {num_actors} {kind} on '
          f'{cores} CPU cores (more than {ACTORS_PER_CORE} per core): they '
          f'will mostly wait for each other; {advice}.')


def preflight(logdir: str, saved: Mapping[str, Any],
              actor_processes: Optional[int] = None) -> List[str]:
  """Checks `logdir` for a run with settings `saved` ({'agent': ...,
  'experiment': ...}) before anything starts; returns warnings
  (`actor_processes`: as `oversubscription`).

  Raises:
    RunDirError: the directory cannot be used (one line naming the path).
  """
  experiment = saved['experiment']
  check_writable(logdir)
  if check_run_files(logdir) is not None:
    check_budget(logdir, int(experiment['max_actor_steps']))
    check_checkpoints(logdir)
  warning = oversubscription(int(experiment['num_actors']),
                             int(experiment['envs_per_actor']),
                             str(experiment['launch_type']),
                             processes=actor_processes)
  return [warning] if warning else []


@dataclasses.dataclass
class Attempt:
  """One attempt at a run: `attempts/<number>/` in the run directory."""
  logdir: str
  number: int
  results_before: Optional[Tuple[int, int, int]]

  @property
  def directory(self) -> str:
    return _attempt_dir(self.logdir, self.number)

  def end(self) -> Optional[Dict[str, Any]]:
    """Records how the attempt ended; returns its results, None if it wrote
    none (then `results.json` still holds the last finished attempt's)."""
    path = os.path.join(self.logdir, RESULTS)
    results = None
    if _signature(path) not in (None, self.results_before):
      try:
        results = read_json(path)
        _copy(path, os.path.join(self.directory, RESULTS))
      except (RunDirError, OSError) as e:  # Reported, never raised here.
        print(f'repertory: {e}', file=sys.stderr, flush=True)
        results = None
    record = read_json(os.path.join(self.directory, ATTEMPT))
    record.update(ended=_now(),
                  status='finished' if results else 'ended without results',
                  counts_at_end=_counts_or_none(self.logdir))
    _write_json(os.path.join(self.directory, ATTEMPT), record)
    return results


def start_attempt(logdir: str, saved: Mapping[str, Any],
                  argv: Optional[List[str]] = None) -> Attempt:
  """Records a new attempt and writes `config.json`; call after `preflight`."""
  numbers = attempts(logdir)
  number = numbers[-1] + 1 if numbers else 1
  attempt = Attempt(logdir, number,
                    _signature(os.path.join(logdir, RESULTS)))
  os.makedirs(attempt.directory)
  _write_json(os.path.join(attempt.directory, CONFIG), saved)
  _write_json(os.path.join(attempt.directory, ATTEMPT), {
      'attempt': number,
      'started': _now(),
      'argv': list(sys.argv if argv is None else argv),
      'cpus': os.cpu_count(),
      'load_average': [round(x, 2) for x in os.getloadavg()],
      'status': 'running (or killed)',
      'counts_at_start': _counts_or_none(logdir),
  })
  _write_json(os.path.join(logdir, CONFIG), saved)
  return attempt


def command_line(argv: Sequence[str]) -> str:
  """The shell command of a recorded `argv` (`attempt.json`'s): `python -m
  repertory.run ...` when `argv[0]` is repertory/run.py (or absent), else
  `python <script> ...` (a script built on `run.run()`)."""
  main_file = argv[0] if argv else ''
  if not main_file or main_file.endswith(os.path.join('repertory', 'run.py')):
    program = 'python -m repertory.run'
  else:
    program = f'python {shlex.quote(main_file)}'
  return ' '.join([program, *map(shlex.quote, argv[1:])])


def _reason(e: OSError) -> str:
  return e.strerror or str(e)


def _now() -> str:
  return time.strftime('%Y-%m-%dT%H:%M:%S%z')


def _signature(path: str) -> Optional[Tuple[int, int, int]]:
  try:
    stat = os.stat(path)
  except FileNotFoundError:
    return None
  return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _counts_or_none(logdir: str) -> Optional[Dict[str, float]]:
  try:
    return read_counts(logdir)
  except RunDirError:
    return None


def _write_json(path: str, value: Any) -> None:
  with open(path + '.tmp', 'w') as f:
    json.dump(value, f, indent=2, default=str)
  os.replace(path + '.tmp', path)


def _copy(source: str, target: str) -> None:
  shutil.copyfile(source, target + '.tmp')
  os.replace(target + '.tmp', target)
