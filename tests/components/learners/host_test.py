"""LearnerHost with a small real algorithm (a linear model, Adam): publish,
non-finite updates and rollback, one version per step, push mode, counting
through a child counter, resume from its checkpoints."""

import csv

import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf

from repertory.components import checkpointing
from repertory.components import counting
from repertory.components import learners
from repertory.components import networks


class Linear(learners.Algorithm):
  """Fits y = 2x; `step(version, x)` takes a batch, or its own if none."""

  def __init__(self, seed=0):
    with networks.seeded(seed):
      self.network = snt.Linear(1)
      self.network(tf.zeros([1, 1]))
    self.optimizer = snt.optimizers.Adam(0.1)
    learners.create_optimizer_state(self.optimizer,
                                    self.network.trainable_variables)
    self.poison = False

  def policy_variables(self):
    return {'policy': networks.get_variables(self.network)}

  def save(self):
    return {'network': self.network, 'optimizer': self.optimizer}

  def step(self, version, x=None):
    x = tf.constant([[1.0], [2.0]] if x is None else x)
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean((self.network(x) - 2 * x) ** 2)
      if self.poison:
        loss = loss * np.nan
    params = self.network.trainable_variables
    applied = bool(learners.apply_if_finite(
        self.optimizer, tape.gradient(loss, params), params, loss))
    return learners.Update({'losses/total': float(loss)},
                           counts={'learner_steps': 1}, applied=applied)


def test_steps_publish_and_count_through_a_child_counter():
  root = counting.Counter()
  host = learners.LearnerHost(Linear(), counter=root, count_every_seconds=60)
  assert host.version == 0
  for _ in range(3):
    metrics = host.step()
  assert metrics['learner/version'] == host.version == 3
  assert host.get_variables(['policy']).version == 3
  # The first increment went at once; the rest wait for the time delta...
  assert root.get_counts() == {'learner_steps': 1}
  host.flush_counts()  # ...or a flush.
  assert root.get_counts() == {'learner_steps': 3}


def test_nonfinite_steps_roll_back_to_the_checkpoint(tmp_path):
  algorithm = Linear()
  host = learners.LearnerHost(
      algorithm, checkpoint_dir=str(tmp_path),
      checkpoint=checkpointing.CheckpointSettings(every_steps=2,
                                                  max_bad_updates=2))
  host.step(), host.step()  # Checkpointed at step 2, version 2.
  saved = networks.get_variables(algorithm.network)
  algorithm.poison = True
  assert host.step()['learner/nonfinite_updates'] == 1
  assert host.version == 2  # Not published.
  host.step()  # The second in a row: rolled back, republished as 3.
  assert host.version == 3 and host.guard.rollbacks == 1
  _, (served,) = host.get_variables(['policy'])
  for name, value in saved.items():
    np.testing.assert_array_equal(served[name], value)
  resumed = learners.LearnerHost(Linear(seed=1), checkpoint_dir=str(tmp_path))
  assert (resumed.version, resumed.steps) == (3, 4)


def test_reset_restarts_network_and_optimizer_as_built(tmp_path):
  algorithm = Linear()
  initial = networks.get_variables(algorithm.network)
  host = learners.LearnerHost(
      algorithm, checkpoint_dir=str(tmp_path),
      checkpoint=checkpointing.CheckpointSettings(every_steps=2, to_keep=1,
                                                  keep_initial=True))
  for _ in range(5):  # The first checkpoint leaves the rotation...
    host.step()
  assert 0 not in host.guard._model_store.versions()  # pylint: disable=protected-access
  assert host.reset() == 6  # ...its tagged copy stays: a new version.
  assert host.steps == 5 and host.guard.rollbacks == 0
  version, (served,) = host.get_variables(['policy'])
  assert version == 6
  for name, value in initial.items():
    np.testing.assert_array_equal(served[name], value)
  slots = [v.numpy() for v in algorithm.optimizer.variables
           if v.dtype == tf.float32 and v.shape == (1, 1)]
  assert slots and not any(np.any(s) for s in slots)  # Adam's m, v: zero.
  host.step()
  assert host.version == 7


def test_reset_needs_the_initial_checkpoint(tmp_path):
  host = learners.LearnerHost(Linear(), checkpoint_dir=str(tmp_path))
  with pytest.raises(ValueError, match='keep_initial=True'):
    host.reset()
  with pytest.raises(ValueError, match='checkpoint_dir'):
    learners.LearnerHost(Linear()).reset()


def test_one_version_per_step_publishes_a_skipped_update():
  algorithm = Linear()
  host = learners.LearnerHost(algorithm, one_version_per_step=True)
  algorithm.poison = True
  host.step()
  assert host.version == 1  # Unchanged weights, next version.


class EveryOther(Linear):
  """Publishes every other applied update (R2D2's steps_per_publish)."""

  steps = 0

  def step(self, version, x=None):
    self.steps += 1
    return super().step(version, x)._replace(publish=self.steps % 2 == 0)


def test_an_unpublished_update_is_not_counted_as_skipped():
  host = learners.LearnerHost(EveryOther())
  metrics = [host.step() for _ in range(4)]
  assert host.version == 2
  assert metrics[-1]['learner/nonfinite_updates'] == 0


def test_push_mode_updates_on_the_callers_data():
  host = learners.LearnerHost(Linear(), pull=False)
  assert host.step() == host.status()  # No data of its own.
  assert host.update([[3.0]])['learner/version'] == 1


def test_bad_log_every_is_refused():
  with pytest.raises(ValueError, match='log_every'):
    learners.LearnerHost(Linear(), log_every=0)


def test_the_first_update_is_logged_then_every_log_every(tmp_path):
  host = learners.LearnerHost(Linear(), logdir=str(tmp_path), log_every=3)
  for _ in range(7):
    host.step()
  host._logger.close()  # pylint: disable=protected-access
  with open(tmp_path / 'csv' / 'learner.csv') as f:
    rows = list(csv.DictReader(f))
  assert [int(float(r['learner/steps'])) for r in rows] == [1, 3, 6]


def test_a_resumed_hosts_first_rate_counts_only_its_own_steps(tmp_path):
  first = learners.LearnerHost(Linear(), checkpoint_dir=str(tmp_path))
  first.guard.model_store.save(first.version + 1, 10**6)
  resumed = learners.LearnerHost(Linear(), checkpoint_dir=str(tmp_path))
  assert resumed.steps == 10**6
  metrics = resumed.step()  # Logged: the first update.
  # One update in at most a few seconds, not the restored million.
  assert metrics['learner/steps_per_second'] < 1e5
