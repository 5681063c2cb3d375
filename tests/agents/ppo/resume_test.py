"""PPO fault tolerance: a second launch with the same logdir continues the
round count and version (and the counts); a non-finite minibatch update is
skipped, and enough bad rounds in a row roll the learner back while the
actors' rounds stay in step."""

import os

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import ppo
from repertory.agents.ppo import acting
from repertory.agents.ppo import learning
from repertory.agents.actor_critic import mlp_policy as networks_lib
from repertory.agents.ppo import program as program_lib
from repertory.components import checkpointing
from repertory.components import counting
from repertory.components import model_store

CATCH = experiment_lib.environment_spec('catch')
TINY = dict(unroll_length=5, num_epochs=2, num_minibatches=2,
            hidden_sizes=(16,), round_timeout_s=300.0)
CHECKPOINT = checkpointing.CheckpointSettings(
    every_steps=2, every_minutes=None, max_bad_updates=2)


def _launch(logdir):
  experiment = experiment_lib.ExperimentConfig(
      agent='ppo', env='catch', num_actors=2, envs_per_actor=2,
      max_actor_steps=10**9, logdir=str(logdir), launch_type='test_mt',
      checkpoint=CHECKPOINT)
  program = ppo.make_program(ppo.Config(**TINY), experiment)
  learner_node, = program.groups['learner']
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=10)
  learner = learner_node.create_handle().dereference()
  counter = program.groups['counter'][0].create_handle().dereference()
  return launched, learner, counter


def test_second_launch_continues_rounds_version_and_counts(tmp_path):
  launched, learner, _ = _launch(tmp_path)
  try:
    for round_index in range(3):
      assert learner.step()['learner/version'] == round_index + 1
  finally:
    launched.stop(timeout=60)
  # The stop handlers wrote the counts, a final checkpoint (round 3) and the
  # policy snapshot.
  latest = model_store.ModelStore(os.path.join(tmp_path, 'checkpoints'),
                                  {}).latest()
  assert (latest.version, latest.step) == (3, 3)
  assert os.path.isdir(tmp_path / 'snapshot')
  first_counts = counting.Counter(
      checkpoint_path=str(tmp_path / 'counts.json')).get_counts()
  assert first_counts['learner_steps'] == 3 * 2 * 2

  launched, learner, counter = _launch(tmp_path)
  try:
    assert learner.get_variables([networks_lib.POLICY]).version == 3
    # The actors take version 3 as their first round; the learner goes on.
    metrics = learner.step()
    assert metrics['learner/version'] == 4
    assert metrics['rounds'] == 4
    assert metrics['charts/policy_lag_max'] == 0
    counts = counter.get_counts()
    assert counts['actor_steps'] >= first_counts['actor_steps']
    assert counts['learner_steps'] >= first_counts['learner_steps']
  finally:
    launched.stop(timeout=60)


@pytest.fixture
def queue_server():
  config = ppo.Config(**TINY)
  with testing.reverb_server(
      program_lib.make_tables(config, CATCH, 1, 2)) as client:
    yield config, client


def _learner(config, client, checkpoint_dir):
  return learning.make_learner(config, CATCH, client, acting.QUEUE,
                               num_actors=1, envs_per_actor=2,
                               logdir=os.path.dirname(checkpoint_dir),
                               checkpoint=CHECKPOINT)


def test_nonfinite_rounds_are_skipped_then_rolled_back(queue_server,
                                                       tmp_path):
  config, client = queue_server
  learner = _learner(config, client, str(tmp_path / 'checkpoints'))
  actor = acting.PPOActor(0, config, 'catch', 2, seed=0, replay=client,
                          learner=learner)

  def play_round(bad_values=False):
    wanted = None if actor.version is None else actor.version + 1
    version = actor.wait_for_round(wanted)
    if bad_values:  # The actor's value head turns NaN: so do its values.
      policy = actor._policy  # pylint: disable=protected-access
      policy.set_weights({
          name: np.full_like(w, np.nan) if 'value' in name else w
          for name, w in policy.get_weights().items()})
    actor.collect_round(version)
    return learner.step()

  play_round()
  play_round()  # Checkpointed at round 2 (version 2).
  first = play_round(bad_values=True)  # NaN advantages: NaN losses.
  assert first['learner/skipped_updates'] == first['charts/updates'] == 4
  assert first['learner/nonfinite_updates'] == 1
  assert first['learner/rollbacks'] == 0
  assert first['learner/version'] == 3  # One new version per round, as ever.
  second = play_round(bad_values=True)  # The second bad round in a row...
  assert second['learner/rollbacks'] == 1  # ...rolls back.
  assert second['learner/version'] == 4  # The rollback's republish is this round's.
  version, (served,) = learner.get_variables([networks_lib.POLICY])
  assert version == 4
  assert all(np.all(np.isfinite(x)) for x in served.values())
  # The actor's rounds stay in step and learning goes on with finite losses.
  third = play_round()
  assert third['learner/version'] == 5 and third['learner/skipped_updates'] == 0
  assert np.isfinite(third['losses/total'])
  assert third['charts/first_minibatch_kl'] == pytest.approx(0, abs=1e-5)


def test_resumed_learner_holds_weights_and_optimizer_state(queue_server,
                                                           tmp_path):
  config, client = queue_server
  learner = _learner(config, client, str(tmp_path / 'checkpoints'))
  actor = acting.PPOActor(0, config, 'catch', 2, seed=0, replay=client,
                          learner=learner)
  for _ in range(2):  # Checkpointed at round 2.
    actor.collect_round(actor.wait_for_round(
        None if actor.version is None else actor.version + 1))
    learner.step()
  resumed = _learner(config, client, str(tmp_path / 'checkpoints'))
  assert (resumed.version, resumed.steps) == (2, 2)
  for got, want in zip(resumed.algorithm.optimizer.variables,
                       learner.algorithm.optimizer.variables):
    np.testing.assert_array_equal(got.numpy(), want.numpy())
  _, (served,) = resumed.get_variables([networks_lib.POLICY])
  _, (trained,) = learner.get_variables([networks_lib.POLICY])
  for name in trained:
    np.testing.assert_array_equal(served[name], trained[name])
