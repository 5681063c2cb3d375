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
"""

import json
import os
import threading
import time
from typing import Dict, List, Mapping, NamedTuple, Optional

from absl import logging
import tensorflow as tf

_PREFIX = 'ckpt'


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
    self._version = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._step = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._checkpoint = tf.train.Checkpoint(
        version=self._version, step=self._step, **objects)
    self._manager = tf.train.CheckpointManager(
        self._checkpoint, os.path.join(directory, 'latest'),
        max_to_keep=max_to_keep, checkpoint_name=_PREFIX)
    self._every_steps = checkpoint_every_steps
    self._every_seconds = (checkpoint_every_minutes * 60
                           if checkpoint_every_minutes else None)
    self._last_save = (time.time(), None)  # (wall time, step)
    self._lock = threading.Lock()

  @property
  def directory(self) -> str:
    return self._directory

  def save(self, version: int, step: int) -> str:
    """Writes a checkpoint of the current state as `version`; returns its path."""
    with self._lock:
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
    return [int(path.rsplit('-', 1)[1]) for path in self._manager.checkpoints]

  def latest(self) -> Optional[Restored]:
    """The latest checkpoint's (version, step, path), read from disk without
    restoring anything; None if there is none."""
    path = self._manager.latest_checkpoint
    if path is None:
      return None
    reader = tf.train.load_checkpoint(path)
    return Restored(int(reader.get_tensor('version/.ATTRIBUTES/VARIABLE_VALUE')),
                    int(reader.get_tensor('step/.ATTRIBUTES/VARIABLE_VALUE')),
                    path)

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
      With neither, the latest checkpoint is restored, if any.
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
      path = self._manager.latest_checkpoint
      if path is None:
        return None
    with self._lock:
      self._checkpoint.restore(path).assert_existing_objects_matched()
      restored = Restored(int(self._version.numpy()), int(self._step.numpy()),
                          path)
      self._last_save = (time.time(), restored.step)
    logging.info('Restored version %d (step %d) from %s.', restored.version,
                 restored.step, path)
    return restored

  def _path_of(self, version: int) -> str:
    for path in self._manager.checkpoints:
      if path.endswith(f'-{version}'):
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
