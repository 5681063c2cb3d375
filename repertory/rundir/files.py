"""The files of a run directory: their names, reading them, one-line errors."""

import json
import os
import shutil
import tempfile
import time
from typing import Any, Dict, Optional

CONFIG = 'config.json'
COUNTS = 'counts.json'
RESULTS = 'results.json'
ATTEMPTS = 'attempts'
ATTEMPT = 'attempt.json'
CHECKPOINTS = 'checkpoints'
REPLAY = 'replay'
# Where a damaged part is set aside (inside the part's own folder for the
# learner checkpoints, which the model store reads the same way).
UNREADABLE = 'unreadable'
# Files and folders only a run writes: their presence makes a run directory.
RUN_FILES = (COUNTS, RESULTS, ATTEMPTS, CHECKPOINTS)


class RunDirError(ValueError):
  """A run directory that cannot be used; the message is one line."""


def read_json(path: str, expect: type = dict) -> Any:
  """Reads a run file; a corrupt one raises `RunDirError` naming it."""
  try:
    with open(path) as f:
      value = json.load(f)
  except (OSError, UnicodeDecodeError) as e:
    raise RunDirError(f'Cannot read {path}: {reason(e)}.') from None
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
                      f'{reason(e)}.') from None


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


def saved_counts(logdir: str) -> Optional[Dict[str, float]]:
  """`<logdir>/counts.json` (the counter's saved counts), if any."""
  if not os.path.exists(os.path.join(logdir, COUNTS)):
    return None
  return read_counts(logdir)


def resumed_at(logdir: str) -> Optional[str]:
  """'Resumed at actor_steps=..., learner_steps=... in <logdir>.' when
  `logdir` holds saved counts (a resumed run), else None."""
  counts = saved_counts(logdir)
  if counts is None:
    return None
  steps = ', '.join(f'{k}={int(v)}' for k, v in sorted(counts.items())
                    if k in ('actor_steps', 'learner_steps'))
  return f'Resumed at {steps or "the start (no steps counted)"} in {logdir}.'


def reason(e: OSError) -> str:
  return e.strerror or str(e)


def now() -> str:
  return time.strftime('%Y-%m-%dT%H:%M:%S%z')


def write_json(path: str, value: Any) -> None:
  """Writes `value` to `path` atomically (a reader sees the old or new)."""
  with open(path + '.tmp', 'w') as f:
    json.dump(value, f, indent=2, default=str)
  os.replace(path + '.tmp', path)


def copy(source: str, target: str) -> None:
  shutil.copyfile(source, target + '.tmp')
  os.replace(target + '.tmp', target)
