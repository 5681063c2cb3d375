"""Checkpoints of a learner's state, by policy version, with tags.

    store = ModelStore(logdir + '/checkpoints',
                       {'network': net, 'optimizer': opt},
                       checkpoint_every_steps=1000)
    restored = store.restore()             # latest, if any: resume
    ...
    store.maybe_save(version, step)        # in the learner loop
    store.tag(version, 'best')             # survives rotation
    store.restore(version=120)             # roll back to version 120
    store.restore(tag='best')
    store.latest()                         # (version, step, path) on disk

The last `max_to_keep` checkpoints rotate (`tf.train.CheckpointManager`);
tagged versions are copied aside and kept until re-tagged.

The latest checkpoint never moves to a lower version: `save` refuses a
version below the highest one in the directory. `restore()` (the latest)
skips checkpoints whose files are unreadable (truncated, corrupt, missing a
shard): it moves them to `<directory>/unreadable/`, logs one line each and
restores the newest readable one; if none is readable it raises
`CheckpointError` naming the file and changes nothing.
"""

import glob
import json
import os
import re
import threading
import time
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

from absl import logging
import tensorflow as tf

_PREFIX = 'ckpt'
_UNREADABLE = 'unreadable'
_VERSION_KEY = 'version/.ATTRIBUTES/VARIABLE_VALUE'
_STEP_KEY = 'step/.ATTRIBUTES/VARIABLE_VALUE'


class CheckpointError(RuntimeError):
  """A checkpoint that cannot be read, or a save that would move the latest
  checkpoint back; the message is one line naming the file."""


def checkpoint_problem(path: str) -> Optional[str]:
  """Why the checkpoint with prefix `path` cannot be read; None if it can.

  Reads every tensor (TensorFlow checks each one's checksum), so a truncated
  or corrupt file, or a missing shard, is found without restoring anything.
  """
  try:
    reader = tf.train.load_checkpoint(path)
    names = reader.get_variable_to_shape_map()
    for name in names:
      reader.get_tensor(name)
    if _VERSION_KEY not in names or _STEP_KEY not in names:
      return 'not a model store checkpoint (no version or step)'
  except Exception as e:  # pylint: disable=broad-except
    text = str(e).strip().splitlines()
    return f'{type(e).__name__}: {text[0] if text else "unreadable"}'
  return None


def _version_of(prefix: str) -> Optional[int]:
  match = re.fullmatch(rf'{_PREFIX}-(\d+)', os.path.basename(prefix))
  return int(match.group(1)) if match else None


class Restored(NamedTuple):
  """What `ModelStore.restore` brought back."""
  version: int
  step: int
  path: str


class ModelStore:
  """Saves and restores trackable objects (networks, optimizers) by version.

  Args:
    directory: where checkpoints live (created if needed).
    objects: the trackables to save, by name (Sonnet modules, Keras
      optimizers, `tf.Variable`s). The policy version and the step counter
      are saved alongside.
    max_to_keep: how many of the latest checkpoints to keep.
    checkpoint_every_steps: `maybe_save` saves once this many steps passed.
    checkpoint_every_minutes: ...or once this many minutes passed.
  """

  def __init__(self, directory: str, objects: Mapping[str, tf.Module],
               max_to_keep: int = 5,
               checkpoint_every_steps: Optional[int] = None,
               checkpoint_every_minutes: Optional[float] = None):
    if max_to_keep < 1:
      raise ValueError(f'max_to_keep must be >= 1, got {max_to_keep}.')
    reserved = {'version', 'step'} & set(objects)
    if reserved:
      raise ValueError(f'Object names {sorted(reserved)} are reserved by the '
                       'model store; rename them.')
    self._directory = directory
    self._max_to_keep = max_to_keep
    self._version = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._step = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._checkpoint = tf.train.Checkpoint(
        version=self._version, step=self._step, **objects)
    self._manager = self._make_manager()
    self._every_steps = checkpoint_every_steps
    self._every_seconds = (checkpoint_every_minutes * 60
                           if checkpoint_every_minutes else None)
    self._last_save = (time.time(), None)  # (wall time, step)
    self._lock = threading.Lock()

  @property
  def directory(self) -> str:
    return self._directory

  def save(self, version: int, step: int) -> str:
    """Writes a checkpoint of the current state as `version`; returns its path.

    Raises:
      CheckpointError: if `version` is below the highest version in the
        directory (the latest checkpoint never moves back).
    """
    with self._lock:
      self._sync_manager()
      highest = self.highest_version()
      if highest is not None and version < highest:
        raise CheckpointError(
            f'Not saving version {version} to {self._latest_dir}: it holds '
            f'version {highest} already (the latest checkpoint never moves '
            'to a lower version; is another learner writing there?).')
      self._version.assign(version)
      self._step.assign(step)
      path = self._manager.save(checkpoint_number=version)
      self._last_save = (time.time(), step)
    logging.info('Checkpointed version %d (step %d) to %s.', version, step,
                 path)
    return path

  def maybe_save(self, version: int, step: int) -> Optional[str]:
    """Saves if `checkpoint_every_steps` or `..._minutes` have passed."""
    last_time, last_step = self._last_save
    due_steps = (self._every_steps is not None and
                 (last_step is None or step - last_step >= self._every_steps))
    due_time = (self._every_seconds is not None and
                time.time() - last_time >= self._every_seconds)
    if due_steps or due_time:
      return self.save(version, step)
    return None

  def versions(self) -> List[int]:
    """The versions of the rotating checkpoints on disk, oldest first."""
    return [version for version, _ in self._on_disk()]

  def highest_version(self) -> Optional[int]:
    """The highest version ever checkpointed here (rotating, tagged or moved
    to `unreadable/`); None in an empty directory. A resumed learner that
    had to fall back to an older checkpoint publishes above it."""
    versions = self.versions() + list(self.tags().values())
    for path in glob.glob(os.path.join(self._directory, _UNREADABLE,
                                       f'{_PREFIX}-*.index')):
      version = _version_of(path[:-len('.index')])
      if version is not None:
        versions.append(version)
    return max(versions) if versions else None

  def latest(self) -> Optional[Restored]:
    """The newest readable checkpoint's (version, step, path), read from disk
    without restoring or moving anything; None if there is none.

    Raises:
      CheckpointError: if there are checkpoints but none is readable.
    """
    found = self._newest_readable()
    if found is None:
      return None
    path, _ = found
    reader = tf.train.load_checkpoint(path)
    return Restored(int(reader.get_tensor(_VERSION_KEY)),
                    int(reader.get_tensor(_STEP_KEY)), path)

  def tags(self) -> Dict[str, int]:
    """Tag name -> version."""
    return {tag: entry['version'] for tag, entry in self._read_tags().items()}

  def tag(self, version: int, tag: str) -> None:
    """Keeps checkpoint `version` under `tag`, outside the rotation."""
    if not tag or '/' in tag or tag.startswith('.'):
      raise ValueError(f'Invalid tag {tag!r}: use a plain name like "best".')
    source = self._path_of(version)
    target = os.path.join(self._directory, 'tags', tag, f'{_PREFIX}-{version}')
    tf.io.gfile.makedirs(os.path.dirname(target))
    for old in tf.io.gfile.glob(os.path.join(os.path.dirname(target), '*')):
      tf.io.gfile.remove(old)
    for name in tf.io.gfile.glob(source + '.*'):
      tf.io.gfile.copy(name, target + name[len(source):], overwrite=True)
    with self._lock:
      tags = self._read_tags()
      tags[tag] = {'version': version, 'path': target}
      self._write_tags(tags)

  def restore(self, version: Optional[int] = None,
              tag: Optional[str] = None) -> Optional[Restored]:
    """Restores a checkpoint into the objects; None if there is none yet.

    Args:
      version: a version to restore (a rotating or tagged checkpoint).
      tag: a tag to restore; at most one of `version` and `tag`.
      With neither, the newest readable checkpoint is restored, if any;
      newer unreadable ones are moved to `<directory>/unreadable/` (one
      warning each).

    Raises:
      CheckpointError: if the checkpoint asked for (or, for the latest,
        every checkpoint) is unreadable; nothing is restored or moved then.
    """
    if version is not None and tag is not None:
      raise ValueError('Pass version or tag, not both.')
    if tag is not None:
      tags = self._read_tags()
      if tag not in tags:
        raise KeyError(f'No checkpoint tagged {tag!r}; tags: {sorted(tags)}.')
      path = tags[tag]['path']
    elif version is not None:
      path = self._path_of(version)
    else:
      found = self._newest_readable()
      if found is None:
        return None
      path, unreadable = found
      with self._lock:
        for bad, problem in unreadable:
          self._set_aside(bad, problem)
        self._sync_manager()
    if version is not None or tag is not None:
      problem = checkpoint_problem(path)
      if problem is not None:
        raise CheckpointError(f'Cannot restore checkpoint {path}: {problem}.')
    with self._lock:
      self._checkpoint.restore(path).assert_existing_objects_matched()
      restored = Restored(int(self._version.numpy()), int(self._step.numpy()),
                          path)
      self._last_save = (time.time(), restored.step)
    logging.info('Restored version %d (step %d) from %s.', restored.version,
                 restored.step, path)
    return restored

  # --- files on disk ---------------------------------------------------------

  @property
  def _latest_dir(self) -> str:
    return os.path.join(self._directory, 'latest')

  def _make_manager(self) -> tf.train.CheckpointManager:
    return tf.train.CheckpointManager(
        self._checkpoint, self._latest_dir, max_to_keep=self._max_to_keep,
        checkpoint_name=_PREFIX)

  def _on_disk(self) -> List[Tuple[int, str]]:
    """(version, path prefix) of each rotating checkpoint whose index file
    is on disk, oldest first (the files are the truth; TensorFlow's
    `checkpoint` state file is rewritten from them when they disagree)."""
    found = []
    for index in glob.glob(os.path.join(self._latest_dir,
                                        f'{_PREFIX}-*.index')):
      prefix = index[:-len('.index')]
      version = _version_of(prefix)
      if version is not None:
        found.append((version, prefix))
    return sorted(found)

  def _newest_readable(
      self) -> Optional[Tuple[str, List[Tuple[str, str]]]]:
    """(newest readable checkpoint, [(newer unreadable one, why)]); None if
    there is no checkpoint; raises `CheckpointError` if none is readable."""
    on_disk = self._on_disk()
    if not on_disk:
      return None
    unreadable = []
    for _, path in reversed(on_disk):
      problem = checkpoint_problem(path)
      if problem is None:
        return path, unreadable
      unreadable.append((path, problem))
    path, problem = unreadable[0]
    older = (f'; the {len(unreadable) - 1} older ones are unreadable too'
             if len(unreadable) > 1 else '; there is no older one')
    raise CheckpointError(
        f'Cannot resume: the latest checkpoint {path} is unreadable '
        f'({problem}){older}. Restore {self._latest_dir} from a backup, or '
        'move it aside to start training afresh.')

  def _set_aside(self, path: str, problem: str) -> None:
    """Moves an unreadable checkpoint's files to `<directory>/unreadable/`."""
    target_dir = os.path.join(self._directory, _UNREADABLE)
    os.makedirs(target_dir, exist_ok=True)
    for name in glob.glob(glob.escape(path) + '.*'):
      os.replace(name, os.path.join(target_dir, os.path.basename(name)))
    logging.warning('Checkpoint %s is unreadable (%s): moved to %s; falling '
                    'back to the one before it.', path, problem, target_dir)

  def _sync_manager(self) -> None:
    """Rewrites TensorFlow's `checkpoint` state file from the files on disk
    if they disagree (a lost or truncated state file, a checkpoint set
    aside), so rotation and `tf.train.latest_checkpoint` see them all."""
    on_disk = [path for _, path in self._on_disk()]
    known = [os.path.normpath(p) for p in self._manager.checkpoints]
    latest = self._manager.latest_checkpoint
    if ([os.path.normpath(p) for p in on_disk] == known and
        (os.path.normpath(on_disk[-1]) if on_disk else None) ==
        (os.path.normpath(latest) if latest else None)):
      return
    if on_disk:
      stamps = [os.path.getmtime(path + '.index') for path in on_disk]
      lines = [f'model_checkpoint_path: "{os.path.basename(on_disk[-1])}"']
      lines += [f'all_model_checkpoint_paths: "{os.path.basename(p)}"'
                for p in on_disk]
      lines += [f'all_model_checkpoint_timestamps: {t!r}' for t in stamps]
      lines.append(f'last_preserved_timestamp: {min(stamps) - 1.0!r}')
      state = os.path.join(self._latest_dir, 'checkpoint')
      with open(state + '.tmp', 'w') as f:
        f.write('\n'.join(lines) + '\n')
      os.replace(state + '.tmp', state)
    else:
      state = os.path.join(self._latest_dir, 'checkpoint')
      if os.path.exists(state):
        os.remove(state)
    logging.warning('Checkpoint state in %s rewritten from the files on '
                    'disk: %s.', self._latest_dir,
                    [os.path.basename(p) for p in on_disk])
    self._manager = self._make_manager()

  def _path_of(self, version: int) -> str:
    for found, path in self._on_disk():
      if found == version:
        return path
    for entry in self._read_tags().values():
      if entry['version'] == version:
        return entry['path']
    raise KeyError(f'No checkpoint of version {version}; on disk: '
                   f'{self.versions()}, tagged: {self.tags()}.')

  def _read_tags(self) -> dict:
    path = os.path.join(self._directory, 'tags.json')
    if not tf.io.gfile.exists(path):
      return {}
    with tf.io.gfile.GFile(path) as f:
      return json.load(f)

  def _write_tags(self, tags: dict) -> None:
    path = os.path.join(self._directory, 'tags.json')
    with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
      json.dump(tags, f, indent=2)
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)
