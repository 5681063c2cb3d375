"""A3C fault tolerance: a second launch with the same logdir continues the
learner's version and gradient count (and the counts); a non-finite
gradient is not applied, and enough of them in a row roll the learner back."""

import os
import time

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import a3c
from repertory.agents.a3c import acting
from repertory.agents.a3c import learning
from repertory.agents.a3c import networks as a3c_networks
from repertory.components import checkpointing
from repertory.agents.actor_critic import mlp_policy as networks_lib
from repertory.components import counting
from repertory.components import model_store

CATCH = experiment_lib.environment_spec('catch')
TINY = dict(unroll_length=5, hidden_sizes=(16,))
CHECKPOINT = dict(every_steps=4, every_minutes=None, max_bad_updates=2)


def _launch(logdir, run_actors):
  experiment = experiment_lib.ExperimentConfig(
      agent='a3c', env='catch', num_actors=2, envs_per_actor=2,
      max_actor_steps=10**9, logdir=str(logdir), launch_type='test_mt',
      checkpoint=checkpointing.CheckpointSettings(**CHECKPOINT))
  program = a3c.make_program(a3c.Config(**TINY), experiment)
  actor_nodes = program.groups['actor']
  if not run_actors:
    for node in actor_nodes:
      node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=10)
  learner = program.groups['learner'][0].create_handle().dereference()
  counter = program.groups['counter'][0].create_handle().dereference()
  actors = [node.create_handle().dereference() for node in actor_nodes]
  return launched, learner, counter, actors


def test_second_launch_continues_version_steps_and_counts(tmp_path):
  launched, learner, counter, _ = _launch(tmp_path, run_actors=True)
  try:
    deadline = time.monotonic() + 120
    while (learner.step()['learner/steps'] < 10 and
           time.monotonic() < deadline):
      time.sleep(0.1)
  finally:
    launched.stop(timeout=60)
  # The stop handlers wrote the counts, a final checkpoint and the policy
  # snapshot.
  first_counts = counting.Counter(
      checkpoint_path=str(tmp_path / 'counts.json')).get_counts()
  restored = model_store.ModelStore(os.path.join(tmp_path, 'checkpoints'),
                                    {}).latest()
  assert restored.step >= 10 and restored.version >= 10
  assert os.path.isdir(tmp_path / 'snapshot')

  launched, learner, counter, actors = _launch(tmp_path, run_actors=False)
  try:
    metrics = learner.step()
    assert metrics['learner/version'] == restored.version
    assert metrics['learner/steps'] == restored.step
    assert learner.get_variables([networks_lib.POLICY]).version == (
        restored.version)
    counts = counter.get_counts()  # Counts continue from counts.json.
    assert counts['learner_steps'] == first_counts['learner_steps']
    assert counts['actor_steps'] == first_counts['actor_steps'] > 0
    # Training goes on from there.
    assert actors[0].step() == restored.version + 1
    assert learner.step()['learner/steps'] == restored.step + 1
  finally:
    launched.stop(timeout=60)


def _learner(tmp_path, **overrides):
  config = a3c.Config(**TINY)
  return config, learning.make_learner(
      config, CATCH, logdir=str(tmp_path),
      checkpoint=checkpointing.CheckpointSettings(
          **dict(CHECKPOINT, **overrides)))


def _push(learner, gradients, version, actor_id=0):
  return learner.update(gradients, version, actor_id)['learner/version']


def test_nonfinite_gradients_are_skipped_then_rolled_back(tmp_path):
  config, learner = _learner(tmp_path)
  actor = acting.A3CActor(0, config, 'catch', 2, seed=0, learner=learner)
  for _ in range(4):
    actor.step()
  assert learner.version == 4  # Checkpointed at step 4.
  weights = [v.numpy().copy() for v in learner.algorithm.network.trainable_variables]
  gradients, _ = actor.compute_gradients(actor.rollout())
  bad = [np.full_like(g, np.nan) for g in gradients]
  # Not applied: same version, same weights.
  assert _push(learner, bad, 4) == 4
  for got, want in zip(learner.algorithm.network.trainable_variables, weights):
    np.testing.assert_array_equal(got.numpy(), want)
  assert learner.step()['learner/nonfinite_updates'] == 1
  # The second in a row (max_bad_updates=2) rolls back to version 4's
  # weights, served as version 5.
  assert _push(learner, bad, 4) == 5
  _, (served,) = learner.get_variables([networks_lib.POLICY])
  assert all(np.all(np.isfinite(x)) for x in served.values())
  for got, want in zip(learner.algorithm.network.trainable_variables, weights):
    np.testing.assert_array_equal(got.numpy(), want)
  assert actor.step() == 6  # Learning goes on.
  assert learner.steps == 7


def test_a_restarted_learner_drops_gradients_of_versions_it_lost(tmp_path):
  # Checkpointed at version 2; the actors went on to version 3 before the
  # learner restarted (--restart_learner) from that checkpoint.
  config, learner = _learner(tmp_path, every_steps=2)
  actor = acting.A3CActor(0, config, 'catch', 2, seed=0, learner=learner)
  for _ in range(3):
    actor.step()
  gradients, _ = actor.compute_gradients(actor.rollout())  # Version 3.
  _, restarted = _learner(tmp_path, every_steps=2)
  assert restarted.version == 2
  metrics = restarted.update(gradients, 3, 0)  # Dropped.
  assert metrics['learner/version'] == 2
  assert metrics['learner/dropped_unknown_version'] == 1
  actor = acting.A3CActor(0, config, 'catch', 2, seed=0, learner=restarted)
  assert actor.step() == 3  # Pulls version 2, and learning goes on.


def test_resumed_learner_holds_the_optimizer_state(tmp_path):
  config, learner = _learner(tmp_path, every_steps=3)
  actor = acting.A3CActor(0, config, 'catch', 2, seed=0, learner=learner)
  for _ in range(3):
    actor.step()
  _, resumed = _learner(tmp_path, every_steps=3)
  assert (resumed.version, resumed.steps) == (3, 3)
  for got, want in zip(resumed.algorithm.optimizer.variables,
                       learner.algorithm.optimizer.variables):
    np.testing.assert_array_equal(got.numpy(), want.numpy())
