"""Saved policies' weights and the settings they were trained with: a run's
latest learner checkpoint (`run:<logdir>`), one of its league snapshots
(`run:<logdir>@<id>`), its league pool (`pool:<logdir>`) or a checkpoint
file (`ckpt:<path>`), as `repertory.play` names its players."""

import glob
import os
import re
from typing import Any, Dict, List, Optional

import numpy as np

from repertory import rundir


def checkpoint_weights(prefix: str) -> Dict[str, np.ndarray]:
  """The network's variables in a checkpoint, named as
  `networks.get_variables` names them (attribute paths without '_')."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(prefix)
  weights = {}
  for key in reader.get_variable_to_shape_map():
    match = re.fullmatch(r'network/(.*)/\.ATTRIBUTES/VARIABLE_VALUE', key)
    if match:
      name = '/'.join(p.lstrip('_') for p in match.group(1).split('/'))
      weights[name] = reader.get_tensor(key)
  if not weights:
    raise ValueError(f'Checkpoint {prefix!r} holds no network variables.')
  return weights


def npz_path(logdir: str, snapshot: str) -> str:
  """Where a `--league` run keeps snapshot `snapshot`'s weights."""
  from repertory.components.league import storage  # pylint: disable=g-import-not-at-top
  return storage.WeightStore.path_in(os.path.join(logdir, 'league',
                                                  'weights'), snapshot)


def snapshot_weights(path: str) -> Dict[str, np.ndarray]:
  """The MLP policy weights of a league snapshot file (checkpoint prefix or
  `.npz` of a `--league` run)."""
  if not path.endswith('.npz'):
    return checkpoint_weights(path)
  from repertory.components.league import exploitability  # pylint: disable=g-import-not-at-top
  from repertory.components.league import storage  # pylint: disable=g-import-not-at-top
  directory, name = os.path.split(path)
  groups = storage.WeightStore(directory).load_file(name)
  weights = exploitability.mlp_weights(groups)
  if weights is None:
    raise ValueError(f'Snapshot {path!r} holds no MLP policy weights '
                     f'(groups: {sorted(groups)}).')
  return weights


def _league_path(logdir: str) -> str:
  return os.path.join(logdir, 'league', 'league.json')


def _league_ids(logdir: str) -> Optional[List[str]]:
  """The ids of run `logdir`'s league snapshots; None without a league."""
  path = _league_path(logdir)
  if not os.path.exists(path):
    return None
  return [p['id'] for p in rundir.read_json(path)['players']]


def pool_weights(logdir: str) -> List[Dict[str, np.ndarray]]:
  """The weights of every snapshot in the league pool of run `logdir`."""
  ids = _league_ids(logdir)
  if ids is None:
    raise ValueError(f'Player pool:{logdir}: no league in {logdir!r} (no '
                     f'{_league_path(logdir)}); a pool comes from a --league '
                     'run.')
  if not ids:
    raise ValueError(f'Player pool:{logdir}: its league has no snapshots.')
  return [snapshot_weights(run_checkpoint(f'{logdir}@{i}')) for i in ids]


def run_checkpoint(spec: str) -> str:
  """The file of `<logdir>[@<snapshot id>]`'s weights: a league snapshot's
  `.npz` or checkpoint prefix, else the latest learner checkpoint's."""
  logdir, _, snapshot = spec.partition('@')
  if not os.path.isdir(logdir):
    raise ValueError(f'Player {"run:" + spec!r}: no run directory {logdir!r}.')
  if snapshot:
    if os.path.exists(npz_path(logdir, snapshot)):
      return npz_path(logdir, snapshot)
    tagged = glob.glob(os.path.join(logdir, 'league', 'snapshots', 'tags',
                                    snapshot, 'ckpt-*.index'))
    if not tagged:
      ids = _league_ids(logdir)
      raise ValueError(f'Run {logdir!r} has no league snapshot {snapshot!r}; '
                       + ('it has no league.' if ids is None else
                          f'snapshots: {", ".join(ids)}.'))
    return tagged[0][:-len('.index')]
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  prefix = tf.train.latest_checkpoint(
      os.path.join(logdir, 'checkpoints', 'latest'))
  if prefix is None:
    raise ValueError(f'Run {logdir!r} has no learner checkpoint yet.')
  return prefix


def network_weights(spec: str) -> Dict[str, np.ndarray]:
  """The weights of a `run:` or `ckpt:` player."""
  kind, _, rest = spec.partition(':')
  if kind == 'run':
    return snapshot_weights(run_checkpoint(rest))
  return checkpoint_weights(rest)


def run_config(spec: str) -> Dict[str, Any]:
  """The `config.json` of the run that player `spec` (`run:<logdir>[@id]`,
  `pool:<logdir>`, also searching: `search:N:run:...`) plays; {} for
  others (`ckpt:`) and a run without one."""
  if spec.startswith('search:'):
    spec = spec[len('search:'):].partition(':')[2]
  kind, _, rest = spec.partition(':')
  path = os.path.join(rest.partition('@')[0], rundir.CONFIG)
  if kind not in ('run', 'pool') or not os.path.exists(path):
    return {}
  return rundir.read_json(path)  # A corrupt one: a one-line error.


def activation(spec: str) -> str:
  """The hidden activation player `spec`'s MLP was trained with (its run's
  `config.activation`; relu, the agents' default, where none is known)."""
  return run_config(spec).get('config', {}).get('activation', 'relu')


def check_run_env(spec: str, env_spec: str) -> None:
  """Refuses a `run:` player (also searching, `search:N:run:...`) trained
  on another game or view (e.g. on 'openspiel:connect_four/relative' and
  played on 'openspiel:connect_four'): its network would read boards it
  never saw."""
  trained = run_config(spec).get('experiment', {}).get('env')
  if trained is not None and trained != env_spec:
    raise ValueError(f'Player {spec!r} was trained on --env={trained!r}; '
                     f'play it with --env={trained}, not {env_spec!r}.')
