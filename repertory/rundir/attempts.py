"""Attempts at a run (`attempts/<n>/`) and the finished-run budget check."""

import dataclasses
import os
import shlex
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from repertory.rundir import files
from repertory.rundir.files import RunDirError


def attempts(logdir: str) -> List[int]:
  """The numbers of the attempts recorded in `logdir`, in order."""
  folder = os.path.join(logdir, files.ATTEMPTS)
  if not os.path.isdir(folder):
    return []
  return sorted(int(name) for name in os.listdir(folder) if name.isdigit())


def attempt_dir(logdir: str, number: int) -> str:
  return os.path.join(logdir, files.ATTEMPTS, str(number))


def recorded_counts(logdir: str) -> Optional[Tuple[str, Dict[str, float]]]:
  """(record path, counts) of the newest attempt record holding counts (at
  its end, else at its start); None if none does."""
  for number in reversed(attempts(logdir)):
    path = os.path.join(attempt_dir(logdir, number), files.ATTEMPT)
    try:
      record = files.read_json(path)
    except RunDirError:
      continue
    for key in ('counts_at_end', 'counts_at_start'):
      counts = record.get(key)
      if isinstance(counts, dict) and counts:
        return path, counts
  return None


def finished(logdir: str) -> Optional[Tuple[str, int]]:
  """(results path, budget) if the latest attempt finished, else None.

  A directory without recorded attempts (written before attempts were kept)
  counts as finished if it has a `results.json`.
  """
  numbers = attempts(logdir)
  if numbers:
    folder = attempt_dir(logdir, numbers[-1])
    results = os.path.join(folder, files.RESULTS)
    config = os.path.join(folder, files.CONFIG)
  else:
    results = os.path.join(logdir, files.RESULTS)
    config = os.path.join(logdir, files.CONFIG)
  if not os.path.exists(results):
    return None
  budget = 0
  if os.path.exists(config):
    budget = int(files.read_json(config).get('experiment', {}).get(
        'max_actor_steps', 0))
  return results, budget


def check_budget(logdir: str, max_actor_steps: int) -> None:
  """Refuses to rerun a finished run unless its budget is raised above both
  its old budget and the actor steps already taken."""
  steps = int(files.read_counts(logdir).get('actor_steps', 0))
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


@dataclasses.dataclass
class Attempt:
  """One attempt at a run: `attempts/<number>/` in the run directory."""
  logdir: str
  number: int
  results_before: Optional[Tuple[int, int, int]]

  @property
  def directory(self) -> str:
    return attempt_dir(self.logdir, self.number)

  def end(self) -> Optional[Dict[str, Any]]:
    """Records how the attempt ended; returns its results, None if it wrote
    none (then `results.json` still holds the last finished attempt's)."""
    path = os.path.join(self.logdir, files.RESULTS)
    results = None
    if _signature(path) not in (None, self.results_before):
      try:
        results = files.read_json(path)
        files.copy(path, os.path.join(self.directory, files.RESULTS))
      except (RunDirError, OSError) as e:  # Reported, never raised here.
        print(f'repertory: {e}', file=sys.stderr, flush=True)
        results = None
    record = files.read_json(os.path.join(self.directory, files.ATTEMPT))
    record.update(ended=files.now(),
                  status='finished' if results else 'ended without results',
                  counts_at_end=_counts_or_none(self.logdir))
    files.write_json(os.path.join(self.directory, files.ATTEMPT), record)
    return results


# Variables that change how fast a run goes (not what it computes): kept
# with the attempt and put before its command line.
RECORDED_ENVIRONMENT = ('TF_NUM_INTRAOP_THREADS', 'TF_NUM_INTEROP_THREADS',
                        'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')


def start_attempt(logdir: str, saved: Mapping[str, Any],
                  argv: Optional[List[str]] = None) -> Attempt:
  """Records a new attempt and writes `config.json`; call after `preflight`."""
  numbers = attempts(logdir)
  number = numbers[-1] + 1 if numbers else 1
  attempt = Attempt(logdir, number,
                    _signature(os.path.join(logdir, files.RESULTS)))
  os.makedirs(attempt.directory)
  files.write_json(os.path.join(attempt.directory, files.CONFIG), saved)
  files.write_json(os.path.join(attempt.directory, files.ATTEMPT), {
      'attempt': number,
      'started': files.now(),
      'argv': list(sys.argv if argv is None else argv),
      'environment': {name: os.environ[name] for name in RECORDED_ENVIRONMENT
                      if name in os.environ},
      'cpus': os.cpu_count(),
      'processor': processor(),
      'load_average': [round(x, 2) for x in os.getloadavg()],
      'status': 'running (or killed)',
      'counts_at_start': _counts_or_none(logdir),
  })
  files.write_json(os.path.join(logdir, files.CONFIG), saved)
  return attempt


def processor(cpuinfo: str = '/proc/cpuinfo') -> Optional[str]:
  """The machine's processor model (Linux's /proc/cpuinfo), if known, with
  its family and model numbers (a virtual machine's name alone, such as
  "AMD EPYC", does not tell its generations apart)."""
  fields: Dict[str, str] = {}
  try:
    with open(cpuinfo) as f:
      for line in f:
        key, _, value = line.partition(':')
        key = key.strip()
        if not key:
          break  # The first processor's block ends.
        fields.setdefault(key, value.strip())
  except OSError:
    return None
  name = fields.get('model name')
  if not name:
    return None
  if 'cpu family' in fields and 'model' in fields:
    name += f" (family {fields['cpu family']}, model {fields['model']})"
  return name


def command_line(argv: Sequence[str],
                 environment: Optional[Mapping[str, str]] = None) -> str:
  """The shell command of a recorded `argv` (`attempt.json`'s): `python -m
  repertory.run ...` when `argv[0]` is repertory/run.py (or absent), else
  `python <script> ...` (a script built on `run.run()`); after the
  `environment` variables it was started with (`NAME=value ...`)."""
  main_file = argv[0] if argv else ''
  if not main_file or main_file.endswith(os.path.join('repertory', 'run.py')):
    program = 'python -m repertory.run'
  else:
    program = f'python {shlex.quote(main_file)}'
  variables = [f'{name}={shlex.quote(value)}'
               for name, value in (environment or {}).items()]
  return ' '.join([*variables, program, *map(shlex.quote, argv[1:])])


def _signature(path: str) -> Optional[Tuple[int, int, int]]:
  try:
    stat = os.stat(path)
  except FileNotFoundError:
    return None
  return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _counts_or_none(logdir: str) -> Optional[Dict[str, float]]:
  try:
    return files.read_counts(logdir)
  except RunDirError:
    return None
