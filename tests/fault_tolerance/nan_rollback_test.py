"""A real IMPALA learner whose loss turns NaN skips, rolls back, recovers.

The learner reads real unrolls (an IMPALA actor on catch, a real Reverb
queue). A corrupted weight (NaN) makes every loss NaN: each update is
skipped, and after `max_bad_updates` in a row the learner restores its latest
checkpoint, republishes it as a new version and trains on.
"""

import numpy as np

from repertory import experiment as experiment_lib
from repertory import testing
from repertory.agents import impala
from repertory.agents.impala import acting
from repertory.components import checkpointing
from repertory.components import model_store
from repertory.agents.actor_critic import learning
from repertory.agents.actor_critic import networks
from repertory.agents.actor_critic import tables

TINY = dict(unroll_length=5, batch_size=4, max_queue_size=16,
            hidden_sizes=(16,), learner_log_every=1)
CHECKPOINT = checkpointing.CheckpointSettings(
    every_steps=2, every_minutes=None, max_bad_updates=2)
CATCH = experiment_lib.environment_spec('catch')
TABLE = tables.TABLE


def _learner(config, client, logdir):
  return learning.make_learner(config, CATCH, client, TABLE,
                               logdir=str(logdir), checkpoint=CHECKPOINT)


def _finite(learner):
  return all(np.all(np.isfinite(v.numpy()))
             for v in learner.algorithm.network.trainable_variables)


def test_nan_loss_is_skipped_then_rolled_back_and_learning_recovers(tmp_path):
  config = impala.Config(**TINY)
  with testing.reverb_server(tables.make_tables(config, CATCH, envs_per_actor=4)) as client:
    learner = _learner(config, client, tmp_path)
    actor = acting.ImpalaActor(0, config, 'catch', 4, 0, learner, client,
                               TABLE)

    def produce_and_step(steps):
      actor.run(num_steps=steps * config.unroll_length)  # 4 unrolls a run.
      return [testing.wait_until(learner.step, 'a batch of unrolls')
              for _ in range(steps)]

    produce_and_step(2)
    assert learner.version == 2
    store = model_store.ModelStore(str(tmp_path / 'checkpoints'), {})
    assert store.versions() == [0, 2]
    good = [v.numpy().copy()
            for v in learner.algorithm.network.trainable_variables]

    # Corrupt one weight: from now on every loss is NaN.
    variable = learner.algorithm.network.trainable_variables[0]
    variable.assign(np.full(variable.shape, np.nan, np.float32))
    first, second = produce_and_step(2)
    assert np.isnan(first['losses/total'])
    assert first['learner/nonfinite_updates'] == 1
    assert second['learner/nonfinite_updates'] == 2
    # Rolled back to version 2's weights, published as version 3.
    assert learner.version == 3
    assert _finite(learner)
    for got, want in zip(learner.algorithm.network.trainable_variables, good):
      np.testing.assert_array_equal(got.numpy(), want)
    version, (served,) = learner.get_variables([networks.POLICY])
    assert version == 3
    assert all(np.all(np.isfinite(x)) for x in served.values())

    for metrics in produce_and_step(2):
      assert np.isfinite(metrics['losses/total'])
    assert learner.version == 5
    assert _finite(learner)


def test_learner_resumes_version_and_steps_and_exports_a_snapshot(tmp_path):
  config = impala.Config(**TINY)
  with testing.reverb_server(tables.make_tables(config, CATCH, envs_per_actor=4)) as client:
    learner = _learner(config, client, tmp_path)
    actor = acting.ImpalaActor(0, config, 'catch', 4, 0, learner, client,
                               TABLE)
    actor.run(num_steps=3 * config.unroll_length)
    for _ in range(3):
      testing.wait_until(learner.step, 'a batch of unrolls')
    # Steps 2 was checkpointed by period; the stop handler writes step 3.
    learner.guard.final_checkpoint()
    weights = [v.numpy() for v in learner.algorithm.network.trainable_variables]
    path = learner.export_snapshot(str(tmp_path / 'snapshot'))

    resumed = _learner(config, client, tmp_path)
    assert resumed.version == 3
    assert resumed.get_variables([networks.POLICY]).version == 3
    assert resumed.steps == 3
    for got, want in zip(resumed.algorithm.network.trainable_variables, weights):
      np.testing.assert_array_equal(got.numpy(), want)

    snapshot = model_store.load_policy(path)
    observations = np.random.RandomState(0).rand(
        5, *CATCH.observations.shape).astype(CATCH.observations.dtype)
    expected = np.argmax(
        resumed.algorithm.network(observations).logits.numpy(), axis=-1)
    np.testing.assert_array_equal(snapshot.policy(observations).numpy(),
                                  expected)
