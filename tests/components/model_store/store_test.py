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
