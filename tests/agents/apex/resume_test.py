"""Ape-X and R2D2 (one shared learner base) resume: a second launch with the
same logdir continues the learner's step, version and weights, the counts,
and the replay table from its Reverb checkpoint."""

import os

import numpy as np
import pytest
import tree

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import apex
from repertory.agents import r2d2
from repertory.agents.apex import program as apex_program
from repertory.components import checkpointing
from repertory.components import model_store

AGENTS = {
    'apex': (apex, dict(torso_sizes=(16,), head_sizes=(16,), batch_size=8,
                        min_replay_size=16, replay_size=500,
                        samples_per_insert=1.0,
                        samples_per_insert_tolerance=20.0,
                        target_update_period=2)),
    'r2d2': (r2d2, dict(torso_sizes=(16,), lstm_size=8, head_sizes=(16,),
                        burn_in=2, trace_length=3, sequence_period=2,
                        batch_size=4, min_replay_size=8, replay_size=500,
                        samples_per_insert=1.0,
                        samples_per_insert_tolerance=50.0,
                        target_update_period=2)),
}


def _launch(agent, logdir, run_actors=True):
  module, tiny = AGENTS[agent]
  config = module.Config(**tiny)
  experiment = experiment_lib.ExperimentConfig(
      agent=agent, env='catch', num_actors=1, envs_per_actor=2,
      max_actor_steps=10**9, eval_episodes=1, logdir=str(logdir),
      launch_type='test_mt', progress_every_seconds=0.5,
      checkpoint=checkpointing.CheckpointSettings(every_steps=2,
                                                  every_minutes=None))
  program = module.make_program(config, experiment)
  learner_node = program.groups['learner'][0]
  learner_node.disable_run()
  if not run_actors:
    for node in program.groups['actor']:
      node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=10)
  learner = learner_node.create_handle().dereference()
  counter = program.groups['counter'][0].create_handle().dereference()
  replay = program.groups['replay'][0].create_handle().dereference()
  return launched, learner, counter, replay


def _table_size(replay):
  return replay.server_info()[apex_program.TABLE].current_size


def _wait_for_count(counter, name, value, timeout_s=60):
  try:
    return testing.wait_until(
        lambda: (lambda c: c if c.get(name) == value else None)(
            counter.get_counts()), f'{name} == {value}', timeout=timeout_s,
        interval=0.1)
  except AssertionError:
    return counter.get_counts()  # The caller's assert says what differs.


@pytest.mark.parametrize('agent', sorted(AGENTS))
def test_second_launch_continues_step_version_and_weights(agent, tmp_path):
  launched, learner, counter, replay = _launch(agent, tmp_path)
  try:
    for _ in range(5):
      learner.step()
    learner.flush_counts()
    first = learner.get_variables(['policy'])
    counts = _wait_for_count(counter, 'learner_steps', 5)
    assert counts['learner_steps'] == 5 and counts['actor_steps'] > 0
    size_before_stop = _table_size(replay)  # Nothing samples from now on.
    assert size_before_stop > 0
  finally:
    launched.stop(timeout=60)
  assert os.listdir(tmp_path / 'replay')  # The final Reverb checkpoint.
  # The stop handler wrote a final checkpoint of step 5 (after the one of
  # step 4).
  restored = model_store.ModelStore(os.path.join(tmp_path, 'checkpoints'),
                                    {}).restore()
  assert (restored.step, restored.version) == (5, first.version)

  launched, learner, counter, replay = _launch(agent, tmp_path,
                                               run_actors=False)
  try:
    # No actor runs: every item comes from the checkpoint.
    assert _table_size(replay) >= size_before_stop
    assert learner.status()['learner/steps'] == 5
    resumed = learner.get_variables(['policy'])
    assert resumed.version == first.version
    tree.map_structure(np.testing.assert_array_equal, resumed.variables,
                       first.variables)
    assert counter.get_counts()['learner_steps'] == 5  # From counts.json.
    learner.step()  # Samples the restored items.
    assert learner.status()['learner/steps'] == 6
    assert learner.get_variables(['policy']).version == first.version + 1
  finally:
    launched.stop(timeout=60)
