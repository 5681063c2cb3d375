"""Tests of the learner's fault tolerance: resume, rollback, final save."""

import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf

from repertory import launch
from repertory.components import learners
from repertory.components import model_store
from repertory.components import variables


class _TinyLearner:
  """A learner in miniature: a network, Adam, a store, the guard."""

  def __init__(self, directory, max_bad_updates=3, every=5):
    tf.random.set_seed(0)
    self.network = snt.nets.MLP([8, 2])
    self.network(tf.zeros([1, 3]))
    self.optimizer = snt.optimizers.Adam(1e-2)
    learners.create_optimizer_state(self.optimizer,
                                    self.network.trainable_variables)
    self.store = variables.VariableStore({'policy': self.weights()})
    self.guard = learners.FaultTolerance(
        model_store.ModelStore(directory, {'network': self.network,
                                           'optimizer': self.optimizer},
                               checkpoint_every_steps=every),
        self.store, lambda: {'policy': self.weights()},
        max_bad_updates=max_bad_updates)
    restored = self.guard.resume()
    self.steps = restored.step if restored else 0
    self.poison = tf.Variable(False)

  def weights(self):
    return [v.numpy() for v in self.network.trainable_variables]

  @tf.function
  def _sgd_step(self):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum((self.network(tf.ones([2, 3])) - 1.0) ** 2)
      loss = tf.where(self.poison, tf.constant(np.nan, tf.float32), loss)
    gradients = tape.gradient(loss, self.network.trainable_variables)
    return learners.apply_if_finite(self.optimizer, gradients,
                                    self.network.trainable_variables, loss)

  def step(self):
    with self.guard.lock:
      applied = bool(self._sgd_step())
      if applied:
        self.store.publish({'policy': self.weights()})
      self.steps += 1
      return self.guard.record_update(applied, self.steps)


def _assert_same(a, b):
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)


def test_nan_updates_are_skipped_then_rolled_back_and_training_recovers(
    tmp_path):
  learner = _TinyLearner(str(tmp_path), max_bad_updates=3, every=5)
  for _ in range(5):
    assert not learner.step()
  assert learner.store.version == 5
  learner.step()
  learner.step()                             # Versions 6, 7: not on disk.
  assert learner.store.version == 7
  # The newest finite weights: the skipped updates leave them as they are,
  # so the rollback keeps them rather than going back to version 5.
  checkpointed = learner.weights()

  learner.poison.assign(True)
  assert [learner.step() for _ in range(3)] == [False, False, True]
  assert learner.guard.total_bad == 3 and learner.guard.rollbacks == 1
  # Back at the checkpoint's weights, served as a new, higher version.
  assert learner.store.version == 8
  version, (served,) = learner.store.get_variables(['policy'])
  assert version == 8
  _assert_same(served, checkpointed)
  _assert_same(learner.weights(), checkpointed)
  assert 8 in learner.guard.model_store.versions()

  learner.poison.assign(False)
  for _ in range(3):
    assert not learner.step()
  assert learner.store.version == 11
  assert learner.guard.consecutive_bad == 0
  assert all(np.all(np.isfinite(w)) for w in learner.weights())


def test_resume_continues_version_step_and_optimizer(tmp_path):
  learner = _TinyLearner(str(tmp_path), every=4)
  for _ in range(6):
    learner.step()
  learner.guard.final_checkpoint()           # As the stop handler does.
  learner.step()
  expected_next = learner.weights()

  # A new process on the same directory: a fresh network, then resume.
  resumed = _TinyLearner(str(tmp_path), every=4)
  assert resumed.steps == 6
  assert resumed.store.version == 6
  assert resumed.store.get_variables(['policy']).version == 6
  resumed.step()
  assert resumed.store.version == 7
  for got, want in zip(resumed.weights(), expected_next):
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_rollback_with_only_the_initial_checkpoint_keeps_the_training(
    tmp_path):
  learner = _TinyLearner(str(tmp_path), max_bad_updates=2, every=1000)
  initial = learner.weights()
  assert learner.guard.model_store.versions() == [0]
  learner.step()
  trained = learner.weights()
  learner.poison.assign(True)
  learner.step()
  assert learner.step()                      # Rolled back: to version 1.
  _assert_same(learner.weights(), trained)
  assert not all(np.array_equal(a, b) for a, b in zip(trained, initial))
  assert learner.store.version == 2
  assert learner.guard.model_store.versions() == [0, 1, 2]


def test_weights_that_are_not_finite_go_back_to_the_latest_checkpoint(
    tmp_path):
  learner = _TinyLearner(str(tmp_path), max_bad_updates=2, every=3)
  for _ in range(4):
    learner.step()                           # Version 3 on disk, then 4.
  at_three = learner.guard.model_store.latest()
  assert at_three.version == 3
  learner.guard.model_store.restore(version=3)
  checkpointed = learner.weights()
  learner.network.trainable_variables[0].assign(
      tf.fill(learner.network.trainable_variables[0].shape, np.inf))
  learner.poison.assign(True)
  learner.step()
  assert learner.step()                      # Not finite: back to version 3.
  _assert_same(learner.weights(), checkpointed)
  assert learner.guard.model_store.versions()[-1] == learner.store.version


def test_explicit_rollback_to_a_tagged_version(tmp_path):
  learner = _TinyLearner(str(tmp_path), every=1)
  learner.step()
  learner.step()
  at_two = learner.weights()
  learner.guard.model_store.tag(2, 'best')
  for _ in range(3):
    learner.step()
  assert learner.guard.rollback(tag='best') == 6
  _assert_same(learner.store.get_variables(['policy']).variables[0], at_two)
  with pytest.raises(KeyError, match='version 99'):
    learner.guard.rollback(version=99)


def test_final_checkpoint_from_the_stop_handler(tmp_path):
  holder = {}

  class Node:

    def __init__(self):
      holder['learner'] = _TinyLearner(str(tmp_path), every=1000)

    def step(self):
      holder['learner'].step()

  program = launch.Program('final_checkpoint')
  node = program.add_node(launch.CourierNode(Node))
  launched = launch.launch(program, launch_type='test_mt')
  client = node.dereference()
  for _ in range(3):
    client.step()
  launched.stop(timeout=30)
  store = model_store.ModelStore(str(tmp_path), {})
  assert store.versions() == [0, 3]
  assert holder['learner'].guard.stopped  # Learners make no update after.


def test_bad_max_bad_updates_is_refused(tmp_path):
  with pytest.raises(ValueError, match='max_bad_updates'):
    learners.FaultTolerance(model_store.ModelStore(str(tmp_path), {}),
                            variables.VariableStore(), dict,
                            max_bad_updates=0)


def _truncate(prefix):
  (data,) = tf.io.gfile.glob(prefix + '.data-*')
  with open(data, 'r+b') as f:
    f.truncate(100)


def _listing(directory):
  return sorted((str(p.relative_to(directory)), p.read_bytes())
                for p in directory.rglob('*') if p.is_file())


def test_unreadable_latest_resumes_from_the_one_before_at_a_higher_version(
    tmp_path):
  learner = _TinyLearner(str(tmp_path), every=5)
  for _ in range(10):
    learner.step()
  at_ten = learner.weights()                 # Checkpointed at step 10.
  learner.step()
  learner.step()
  learner.guard.final_checkpoint()           # Version 12, then cut short.
  store = learner.guard.model_store
  assert store.versions() == [0, 5, 10, 12]
  _truncate(store.latest().path)

  resumed = _TinyLearner(str(tmp_path), every=5)
  assert resumed.steps == 10
  _assert_same(resumed.weights(), at_ten)
  # Served and checkpointed above every version ever written: a reader that
  # holds version 12 fetches these weights, and "latest" never goes back.
  assert resumed.store.version == 13
  assert resumed.guard.model_store.versions() == [0, 5, 10, 13]
  assert resumed.guard.model_store.latest().version == 13
  assert (tmp_path / 'unreadable' / 'ckpt-12.index').exists()
  resumed.step()
  assert resumed.store.version == 14


def test_failed_resume_registers_no_final_checkpoint(tmp_path):
  # A checkpoint of another network: resume() raises in the learner's node.
  other = snt.nets.MLP([4, 2])
  other(tf.zeros([1, 3]))
  # Version 0: a save of the fresh weights (version 0) is not refused as
  # lower, so only the order of registration keeps it from happening.
  model_store.ModelStore(str(tmp_path), {'network': other}).save(0, 70)
  before = _listing(tmp_path)

  program = launch.Program('failed_resume')
  program.add_node(launch.CourierNode(_TinyLearner, str(tmp_path)))
  launched = launch.launch(program, launch_type='test_mt')
  with pytest.raises(launch.NodeError, match='incompatible'):
    launched.wait(timeout=60)             # The node's failure stops it.
  # On the way out nothing wrote the fresh weights over the checkpoint.
  assert _listing(tmp_path) == before


def test_no_checkpoint_before_resume(tmp_path):
  guard = learners.FaultTolerance(model_store.ModelStore(str(tmp_path), {}),
                                  variables.VariableStore({'p': [1.0]}),
                                  lambda: {'p': [1.0]})
  with pytest.raises(RuntimeError, match='resume'):
    guard.checkpoint()
  assert not guard.resumed
  assert guard.resume() is None and guard.resumed
  assert guard.model_store.versions() == [0]
