"""Where a league keeps its snapshots' weights, and the check of a league
directory before a run starts.

`WeightStore` writes each snapshot's variable groups ({group: nest of
arrays}) to `<directory>/<id>.npz` (no pickles), atomically; `load` puts
them back into the structure of a template (the learner's own groups).

`check_directory(directory, resumed)` refuses, in one line, a league
directory that a run cannot continue: a `league.json` that is not a league
(damaged, `[]`), or one that is missing while the directory holds
snapshots' weights or the run resumes (its counts exist).
"""

import json
import os
import tempfile
from typing import Any, Dict, Mapping

import numpy as np
import tree

REQUIRED_KEYS = ('players', 'last_snapshot', 'payoff', 'elo', 'elo_k', 'games')


def _file_name(player: str) -> str:
  return player.replace('@', '_at_').replace('/', '_') + '.npz'


class WeightStore:
  """Snapshots' variable groups as `.npz` files in `directory`."""

  def __init__(self, directory: str):
    self._directory = directory
    os.makedirs(directory, exist_ok=True)

  def path(self, player: str) -> str:
    return os.path.join(self._directory, _file_name(player))

  def save(self, player: str, variables: Mapping[str, Any]) -> None:
    flat = tree.flatten(dict(variables))
    fd, tmp = tempfile.mkstemp(prefix='.weights.', suffix='.npz',
                               dir=self._directory)
    try:
      with os.fdopen(fd, 'wb') as f:
        np.savez(f, *[np.asarray(x) for x in flat])
        f.flush()
        os.fsync(f.fileno())
      os.replace(tmp, self.path(player))
    except BaseException:
      if os.path.exists(tmp):
        os.remove(tmp)
      raise

  def load(self, player: str, template: Mapping[str, Any]) -> Dict[str, Any]:
    """Snapshot `player`'s groups in the structure of `template`."""
    with np.load(self.path(player), allow_pickle=False) as data:
      flat = [data[f'arr_{i}'] for i in range(len(data.files))]
    return tree.unflatten_as(dict(template), flat)

  def remove(self, player: str) -> None:
    if os.path.exists(self.path(player)):
      os.remove(self.path(player))


def check_directory(directory: str, resumed: bool) -> None:
  """Refuses (ValueError, one line) a league directory a run cannot go on
  from; see the module docstring. A fresh directory passes."""
  path = os.path.join(directory, 'league.json')
  weights = os.path.join(directory, 'weights')
  has_weights = os.path.isdir(weights) and any(
      name.endswith('.npz') for name in os.listdir(weights))
  if not os.path.exists(path):
    if has_weights or (resumed and os.path.isdir(directory)):
      raise ValueError(
          f'{path} is missing while its league holds snapshots or the run '
          'resumes (counts.json): restore league.json, or move '
          f'{directory} away to start a new league.')
    return
  try:
    with open(path) as f:
      state = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError(f'{path} is not readable JSON ({e}); restore it, or move '
                     f'{directory} away to start a new league.') from None
  if not isinstance(state, dict):
    raise ValueError(f'{path} is not a league (a JSON {type(state).__name__}, '
                     'not an object); restore it, or move '
                     f'{directory} away to start a new league.')
  missing = [k for k in REQUIRED_KEYS if k not in state]
  if missing:
    raise ValueError(f'{path} is not a league (no {", ".join(missing)}); '
                     f'restore it, or move {directory} away to start a new '
                     'league.')
