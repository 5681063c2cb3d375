"""Tests of the model store: rotation, tags, restore by version, rollback."""

import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf

from repertory.components import model_store


def _make_objects():
  network = snt.nets.MLP([8, 3])
  network(tf.zeros([1, 4]))
  optimizer = snt.optimizers.Adam(1e-2)
  return network, optimizer


def _train_step(network, optimizer):
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum((network(tf.ones([2, 4])) - 1.0) ** 2)
  grads = tape.gradient(loss, network.trainable_variables)
  optimizer.apply(grads, network.trainable_variables)


def _weights(network):
  return [v.numpy().copy() for v in network.trainable_variables]


def test_rotation_keeps_last_k_and_tags_survive(tmp_path):
  network, optimizer = _make_objects()
  store = model_store.ModelStore(str(tmp_path), {'network': network,
                                                 'optimizer': optimizer},
                                 max_to_keep=3)
  saved = {}
  for version in range(1, 8):
    _train_step(network, optimizer)
    store.save(version, step=10 * version)
    saved[version] = _weights(network)
    if version == 4:
      store.tag(4, 'best')
  assert store.versions() == [5, 6, 7]
  assert store.tags() == {'best': 4}

  restored = store.restore(version=4)  # Rotated out, but tagged.
  assert restored.version == 4 and restored.step == 40
  for got, want in zip(_weights(network), saved[4]):
    np.testing.assert_array_equal(got, want)

  restored = store.restore(tag='best')
  assert restored.version == 4

  restored = store.restore()  # Latest.
  assert restored.version == 7 and restored.step == 70
  for got, want in zip(_weights(network), saved[7]):
    np.testing.assert_array_equal(got, want)


def test_resume_in_a_new_store_restores_optimizer_state(tmp_path):
  network, optimizer = _make_objects()
  store = model_store.ModelStore(str(tmp_path), {'network': network,
                                                 'optimizer': optimizer})
  _train_step(network, optimizer)
  _train_step(network, optimizer)
  store.save(version=2, step=2)
  _train_step(network, optimizer)
  expected_after_third = _weights(network)

  # A fresh process: new objects, same directory.
  network2, optimizer2 = _make_objects()
  _train_step(network2, optimizer2)  # Creates optimizer slots to restore into.
  store2 = model_store.ModelStore(str(tmp_path), {'network': network2,
                                                  'optimizer': optimizer2})
  assert store2.restore() == model_store.Restored(2, 2, store2.restore().path)
  _train_step(network2, optimizer2)
  for got, want in zip(_weights(network2), expected_after_third):
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_empty_store_restores_nothing_and_unknown_version_names_choices(
    tmp_path):
  network, _ = _make_objects()
  store = model_store.ModelStore(str(tmp_path), {'network': network})
  assert store.restore() is None
  store.save(3, 3)
  with pytest.raises(KeyError, match=r'version 9.*\[3\]'):
    store.restore(version=9)
  with pytest.raises(KeyError, match='nope'):
    store.restore(tag='nope')


def test_maybe_save_by_steps(tmp_path):
  network, _ = _make_objects()
  store = model_store.ModelStore(str(tmp_path), {'network': network},
                                 checkpoint_every_steps=100)
  saved = [store.maybe_save(version=s, step=s) for s in (1, 50, 101, 150, 201)]
  assert [s is not None for s in saved] == [True, False, True, False, True]


def test_reserved_names_are_refused(tmp_path):
  with pytest.raises(ValueError, match='reserved'):
    model_store.ModelStore(str(tmp_path), {'version': tf.Variable(1)})


def test_latest_reads_version_and_step_without_restoring(tmp_path):
  network, optimizer = _make_objects()
  store = model_store.ModelStore(str(tmp_path), {'network': network,
                                                 'optimizer': optimizer})
  assert store.latest() is None
  store.save(3, step=30)
  _train_step(network, optimizer)
  store.save(5, step=52)
  weights = _weights(network)
  _train_step(network, optimizer)  # Not saved; latest() must not undo it.
  changed = _weights(network)
  reader = model_store.ModelStore(str(tmp_path), {})
  latest = reader.latest()
  assert (latest.version, latest.step) == (5, 52)
  assert latest.path.endswith('-5')
  assert store.latest() == latest
  assert not np.allclose(changed[0], weights[0])
  np.testing.assert_array_equal(_weights(network)[0], changed[0])


# --- damaged directories ------------------------------------------------------


def _truncate(prefix, size=100):
  """Cuts a checkpoint's data file short, as a full disk or a bad copy does."""
  (data,) = [p for p in tf.io.gfile.glob(prefix + '.data-*')]
  with open(data, 'r+b') as f:
    f.truncate(size)


def _listing(directory):
  return sorted((str(p.relative_to(directory)), p.read_bytes())
                for p in directory.rglob('*') if p.is_file())


def _saved_store(tmp_path, versions):
  network, optimizer = _make_objects()
  store = model_store.ModelStore(str(tmp_path), {'network': network,
                                                 'optimizer': optimizer})
  weights = {}
  for version in versions:
    _train_step(network, optimizer)
    store.save(version, step=10 * version)
    weights[version] = _weights(network)
  return store, weights


def test_unreadable_latest_falls_back_to_the_newest_readable(tmp_path):
  store, weights = _saved_store(tmp_path, [1, 2, 3])
  _truncate(store.restore().path)               # ckpt-3.

  network, optimizer = _make_objects()
  _train_step(network, optimizer)
  resumed = model_store.ModelStore(str(tmp_path), {'network': network,
                                                   'optimizer': optimizer})
  restored = resumed.restore()
  assert (restored.version, restored.step) == (2, 20)
  for got, want in zip(_weights(network), weights[2]):
    np.testing.assert_array_equal(got, want)
  # Set aside, not deleted; counted by highest_version (versions go on above).
  assert resumed.versions() == [1, 2]
  assert sorted(p.name for p in (tmp_path / 'unreadable').iterdir()) == [
      'ckpt-3.data-00000-of-00001', 'ckpt-3.index']
  assert resumed.highest_version() == 3
  assert tf.train.latest_checkpoint(str(tmp_path / 'latest')).endswith('-2')
  with pytest.raises(model_store.CheckpointError, match='version 3'):
    resumed.save(2, step=21)                    # Below the highest: refused.
  resumed.save(4, step=21)
  assert resumed.versions() == [1, 2, 4]
  assert tf.train.latest_checkpoint(str(tmp_path / 'latest')).endswith('-4')


def test_no_readable_checkpoint_stops_with_one_line_and_changes_nothing(
    tmp_path):
  store, _ = _saved_store(tmp_path, [1, 2])
  for version in (1, 2):
    _truncate(store._path_of(version))  # pylint: disable=protected-access
  before = _listing(tmp_path)

  network, _ = _make_objects()
  resumed = model_store.ModelStore(str(tmp_path), {'network': network})
  with pytest.raises(model_store.CheckpointError) as raised:
    resumed.restore()
  message = str(raised.value)
  assert '\n' not in message
  assert str(tmp_path / 'latest' / 'ckpt-2') in message
  assert 'older ones are unreadable too' in message
  with pytest.raises(model_store.CheckpointError):
    resumed.latest()
  assert _listing(tmp_path) == before


def test_explicit_version_that_is_unreadable_is_refused_not_moved(tmp_path):
  store, _ = _saved_store(tmp_path, [1, 2])
  _truncate(store._path_of(1))  # pylint: disable=protected-access
  before = _listing(tmp_path)
  with pytest.raises(model_store.CheckpointError, match=r'ckpt-1: '):
    store.restore(version=1)
  assert _listing(tmp_path) == before
  assert store.restore(version=2).version == 2


def test_lost_or_truncated_state_file_still_resumes_the_latest(tmp_path):
  store, weights = _saved_store(tmp_path, [1, 2, 3])
  state = tmp_path / 'latest' / 'checkpoint'
  state.write_text(state.read_text()[:12])      # Unparsable.

  network, optimizer = _make_objects()
  _train_step(network, optimizer)
  resumed = model_store.ModelStore(str(tmp_path), {'network': network,
                                                   'optimizer': optimizer})
  assert resumed.restore().version == 3         # Not a fresh start.
  for got, want in zip(_weights(network), weights[3]):
    np.testing.assert_array_equal(got, want)
  assert tf.train.latest_checkpoint(str(tmp_path / 'latest')).endswith('-3')

  state.unlink()
  again = model_store.ModelStore(str(tmp_path), {'network': network,
                                                 'optimizer': optimizer},
                                 max_to_keep=3)
  assert again.latest().version == 3
  again.save(4, step=40)                        # Rotation sees every file.
  assert again.versions() == [2, 3, 4]


def test_checkpoint_problem_names_the_cause(tmp_path):
  store, _ = _saved_store(tmp_path, [1])
  path = store.restore().path
  assert model_store.checkpoint_problem(path) is None
  _truncate(path)
  assert 'Read less bytes' in model_store.checkpoint_problem(path)
  assert model_store.checkpoint_problem(str(tmp_path / 'missing')) is not None
