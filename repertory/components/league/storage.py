"""Where a league keeps its snapshots' weights, and the check of a league
directory before a run starts.

`WeightStore` writes each snapshot's variable groups ({group: nest of
arrays}) to `<directory>/<id>.npz` (no pickles), atomically, with each
array's path in the nest; `load` puts them back into the structure of a
template (the learner's own groups), or, without one, into nested dicts
by those paths (what `repertory.play` reads).

`check_directory(directory, resumed)` refuses, in one line, a league
directory that a run cannot continue: a `league.json` that is not a league
(damaged, `[]`), or one that is missing while the directory holds
snapshots' weights or the run resumes (its counts exist).
"""

import json
import os
import tempfile
from typing import Any, Dict, Mapping, Optional

import numpy as np
import tree

REQUIRED_KEYS = ('players', 'last_snapshot', 'payoff', 'elo', 'elo_k', 'games')
_PATHS = 'paths'  # The npz entry naming each array's path ('group/name').


def _file_name(player: str) -> str:
  return player.replace('@', '_at_').replace('/', '_') + '.npz'


class WeightStore:
  """Snapshots' variable groups as `.npz` files in `directory`."""

  def __init__(self, directory: str):
    self._directory = directory
    os.makedirs(directory, exist_ok=True)

  def path(self, player: str) -> str:
    return self.path_in(self._directory, player)

  @staticmethod
  def path_in(directory: str, player: str) -> str:
    """Where snapshot `player`'s weights are in `directory`."""
    return os.path.join(directory, _file_name(player))

  def save(self, player: str, variables: Mapping[str, Any]) -> None:
    flat = tree.flatten(dict(variables))
    paths = np.array(['\n'.join(str(k) for k in path) for path, _ in
                      tree.flatten_with_path(dict(variables))])
    fd, tmp = tempfile.mkstemp(prefix='.weights.', suffix='.npz',
                               dir=self._directory)
    try:
      with os.fdopen(fd, 'wb') as f:
        np.savez(f, *[np.asarray(x) for x in flat], **{_PATHS: paths})
        f.flush()
        os.fsync(f.fileno())
      os.replace(tmp, self.path(player))
    except BaseException:
      if os.path.exists(tmp):
        os.remove(tmp)
      raise

  def load(self, player: str, template: Optional[Mapping[str, Any]] = None
           ) -> Dict[str, Any]:
    """Snapshot `player`'s groups in the structure of `template`, or (None)
    as nested dicts by their saved paths."""
    return self.load_file(_file_name(player), template)

  def load_file(self, name: str, template: Optional[Mapping[str, Any]] = None
                ) -> Dict[str, Any]:
    """`load` of the file `name` in the directory."""
    path = os.path.join(self._directory, name)
    with np.load(path, allow_pickle=False) as data:
      count = len([name for name in data.files if name.startswith('arr_')])
      flat = [data[f'arr_{i}'] for i in range(count)]
      paths = data[_PATHS] if _PATHS in data.files else None
    if template is not None:
      return tree.unflatten_as(dict(template), flat)
    if paths is None:
      raise ValueError(f'{path} names no paths of its arrays '
                       '(written by an earlier version): load it with a '
                       'template of its groups.')
    out: Dict[str, Any] = {}
    for key_path, value in zip(paths, flat):
      *parents, leaf = str(key_path).split('\n')
      node = out
      for key in parents:
        node = node.setdefault(key, {})
      node[leaf] = value
    return out

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
