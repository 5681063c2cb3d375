"""Each part of a run directory checked before any node starts.

A damaged part is named in one line and either set aside (the newest
readable one is used) or the run is refused:

- learner checkpoints (`checkpoints/latest/ckpt-<version>.*`): a checkpoint
  whose files are unreadable, or data without its `.index`, moves to
  `checkpoints/unreadable/`; none readable refuses the run.
- the replay checkpoint (`replay/<time>/`): one with an unreadable file,
  items that name chunks it does not hold, or fewer items of a table than
  its rate limiter counts, moves to `replay-unreadable/<time>/` (Reverb
  restores the newest of the rest, or starts empty).
- `counts.json`: missing beside learner checkpoints, it is restored from the
  newest attempt record that holds counts, else the run is refused;
  present with steps taken but no learner checkpoint refuses the run
  (it would train a fresh learner on a spent budget).
- `checkpoints/tags.json` written at another path (the run directory was
  moved) is pointed at the tagged checkpoints where they are now.
"""

import collections
import glob
import os
import re
from typing import List, Optional, Tuple

from repertory.rundir import attempts as attempts_lib
from repertory.rundir import files
from repertory.rundir.files import RunDirError

_CHECKPOINT = re.compile(r'ckpt-(\d+)\.(index|data-\d+-of-\d+)$')
REPLAY_UNREADABLE = 'replay-unreadable'


def _set_aside(paths: List[str], target_dir: str) -> None:
  os.makedirs(target_dir, exist_ok=True)
  for path in paths:
    os.replace(path, os.path.join(target_dir, os.path.basename(path)))


def learner_checkpoints(logdir: str) -> Tuple[Optional[int], List[str]]:
  """(version of the newest readable learner checkpoint or None if there is
  none, warnings); unreadable newer ones and data without an index are set
  aside.

  Raises:
    RunDirError: there are checkpoints and none is readable.
  """
  directory = os.path.join(logdir, files.CHECKPOINTS)
  latest = os.path.join(directory, 'latest')
  unreadable = os.path.join(directory, files.UNREADABLE)
  by_version = {}
  for path in glob.glob(os.path.join(latest, 'ckpt-*')):
    match = _CHECKPOINT.search(os.path.basename(path))
    if match:
      by_version.setdefault(int(match.group(1)), []).append(path)
  bad = []
  for version in sorted(by_version, reverse=True):
    paths = by_version[version]
    prefix = os.path.join(latest, f'ckpt-{version}')
    problem = (None if any(p.endswith('.index') for p in paths)
               else 'its .index file is missing')
    if problem is None:
      from repertory.components import model_store  # pylint: disable=g-import-not-at-top
      problem = model_store.checkpoint_problem(prefix)
    if problem is None:
      warnings = []
      for bad_prefix, bad_paths, why in bad:
        _set_aside(bad_paths, unreadable)
        warnings.append(f'learner checkpoint {bad_prefix} is unreadable '
                        f'({why}): set aside in {unreadable}; using the one '
                        'before it.')
      return version, warnings
    bad.append((prefix, paths, problem))
  if bad:  # Nothing is moved: the directory stays as it was.
    prefix, _, why = bad[0]
    raise RunDirError(
        f'No learner checkpoint in {latest} is readable (the latest, '
        f'{prefix}: {why}); restore them from a backup, or choose another '
        '--logdir to start afresh.')
  return None, []


def _tfrecord_records(path: str) -> Tuple[List[bytes], Optional[str]]:
  """(records, None) of the TFRecord file at `path` read to its end (plain or
  compressed, as Reverb writes them), or ([], why it cannot be)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  problems = []
  for compression in ('ZLIB', ''):
    try:
      return [r.numpy() for r in tf.data.TFRecordDataset(
          path, compression_type=compression)], None
    except (tf.errors.OpError, ValueError) as e:
      problems.append(str(e).strip().splitlines()[0] if str(e).strip()
                      else type(e).__name__)
  return [], problems[-1]


def _replay_problem(folder: str) -> Optional[Tuple[str, str]]:
  """(file, why) if the Reverb checkpoint in `folder` cannot be restored: a
  file unreadable to its end, items that name chunks `chunks.tfrecord`
  does not hold, or fewer items of a table than its rate limiter counts
  (inserts less deletes): a file cut at a record boundary reads to its end,
  and Reverb aborts the process on it (a queue's selector finds no item
  where its rate limiter counts one); None if it can."""
  from reverb.cc import schema_pb2  # pylint: disable=g-import-not-at-top
  from reverb.cc.checkpointing import checkpoint_pb2  # pylint: disable=g-import-not-at-top
  records = {}
  for path in sorted(glob.glob(os.path.join(folder, '*.tfrecord'))):
    records[os.path.basename(path)], problem = _tfrecord_records(path)
    if problem is not None:
      return path, problem
  chunks_path = os.path.join(folder, 'chunks.tfrecord')
  held = set()
  for record in records.get('chunks.tfrecord', []):
    chunk = schema_pb2.ChunkData()
    chunk.ParseFromString(record)
    held.add(chunk.chunk_key)
  missing = 0
  held_items = collections.Counter()
  for record in records.get('items.tfrecord', []):
    item = schema_pb2.PrioritizedItem()
    item.ParseFromString(record)
    held_items[item.table] += 1
    missing += sum(s.chunk_key not in held
                   for column in item.flat_trajectory.columns
                   for s in column.chunk_slices)
  if missing:
    return chunks_path, (f'{missing} chunk references of items.tfrecord '
                         'name chunks it does not hold (cut short?)')
  for record in records.get('tables.tfrecord', []):
    table = checkpoint_pb2.PriorityTableCheckpoint()
    table.ParseFromString(record)
    counted = (table.rate_limiter.insert_count -
               table.rate_limiter.delete_count)
    if held_items[table.table_name] < counted:
      return os.path.join(folder, 'items.tfrecord'), (
          f'{held_items[table.table_name]} items of table '
          f'{table.table_name!r}, whose rate limiter counts {counted} (cut '
          'short?)')
  return None


def replay_checkpoint(logdir: str) -> List[str]:
  """Sets aside replay checkpoints with an unreadable file, newest first,
  until a readable one; returns a warning per one set aside."""
  directory = os.path.join(logdir, files.REPLAY)
  if not os.path.isdir(directory):
    return []
  warnings = []
  target = os.path.join(logdir, REPLAY_UNREADABLE)
  for name in sorted(os.listdir(directory), reverse=True):
    folder = os.path.join(directory, name)
    if not os.path.isdir(folder) or not glob.glob(
        os.path.join(folder, '*.tfrecord')):
      continue
    bad = _replay_problem(folder)
    if bad is None:
      return warnings
    _set_aside([folder], target)
    record, problem = bad
    warnings.append(f'replay checkpoint {folder} is unreadable ({record}: '
                    f'{problem}): set aside in {target}; the replay restores '
                    'the one before it, if any, else starts empty.')
  return warnings


def counts(logdir: str, checkpoint_version: Optional[int]) -> List[str]:
  """Checks `counts.json` against the learner checkpoints (see the module
  doc); returns warnings.

  Raises:
    RunDirError: counts without checkpoints, or checkpoints without counts
      and no attempt record to restore them from.
  """
  path = os.path.join(logdir, files.COUNTS)
  saved = files.saved_counts(logdir)
  if saved is not None:
    steps = int(saved.get('actor_steps', 0))
    if checkpoint_version is None and steps > 0:
      raise RunDirError(
          f'{logdir} holds counts ({path}: actor_steps={steps}) but no '
          f'learner checkpoint in {os.path.join(logdir, files.CHECKPOINTS)}: '
          'resuming would train a fresh learner on a budget already spent; '
          'restore the checkpoints, or choose another --logdir.')
    return []
  if checkpoint_version is None:
    return []
  recorded = attempts_lib.recorded_counts(logdir)
  if recorded is None:
    raise RunDirError(
        f'{path} is missing beside learner checkpoints (version '
        f'{checkpoint_version}) and no attempt record holds counts: the '
        'budget would restart at 0; restore it from a backup, or choose '
        'another --logdir.')
  record, values = recorded
  files.write_json(path, values)
  shown = ', '.join(f'{k}={int(v)}' for k, v in sorted(values.items()))
  return [f'{path} was missing: restored from {record} ({shown}).']


def tags(logdir: str) -> List[str]:
  """Points `checkpoints/tags.json` written at another path (a moved run
  directory) at the tagged checkpoints where they are now."""
  path = os.path.join(logdir, files.CHECKPOINTS, 'tags.json')
  if not os.path.exists(path):
    return []
  entries = files.read_json(path)
  moved = False
  for entry in entries.values():
    old = entry.get('path', '') if isinstance(entry, dict) else ''
    here = os.path.join(logdir, files.CHECKPOINTS,
                        *old.split(os.sep)[-3:])  # tags/<tag>/ckpt-<v>
    if old and not glob.glob(glob.escape(old) + '.*') and glob.glob(
        glob.escape(here) + '.*'):
      entry['path'], moved = here, True
  if not moved:
    return []
  files.write_json(path, entries)
  return [f'{path} named checkpoints at another path (the run directory '
          'moved): pointed at the ones here.']
