"""Checkpoint settings: validation, the agent fields they replace, and old
run directories (config.json written before the move)."""

import dataclasses
import json

import pytest

from repertory import experiment as experiment_lib
from repertory import rundir
from repertory.agents import impala
from repertory.components import checkpointing


@pytest.mark.parametrize('field, value', [('to_keep', 0),
                                          ('max_bad_updates', -1),
                                          ('every_steps', 0),
                                          ('replay_every_minutes', -5.0)])
def test_bad_values_are_refused_with_the_field(field, value):
  with pytest.raises(ValueError, match=f'CheckpointSettings.{field}'):
    checkpointing.CheckpointSettings(**{field: value})


def test_overrides_split_new_and_former_names():
  agent, checkpoint = checkpointing.split_overrides({
      'learning_rate': '0.1', 'checkpoint.to_keep': '5',
      'checkpoint_every_steps': '10'})
  assert agent == {'learning_rate': '0.1'}
  assert checkpoint == {'to_keep': '5', 'every_steps': '10'}


def _saved(experiment, config):
  return json.loads(json.dumps(
      {'agent': dataclasses.asdict(config),
       'experiment': dataclasses.asdict(experiment)}, default=str))


def _old_run_dir(tmp_path, every_steps=1000):
  """A config.json as runs wrote it when agents held the checkpoint fields."""
  experiment = experiment_lib.ExperimentConfig(logdir=str(tmp_path))
  saved = _saved(experiment, impala.Config())
  del saved['experiment']['checkpoint']
  saved['agent'].update(checkpoint_every_steps=every_steps,
                        checkpoint_every_minutes=2.0, checkpoints_to_keep=3,
                        max_bad_updates=10, replay_checkpoint_minutes=5.0)
  (tmp_path / 'config.json').write_text(json.dumps(saved))
  return experiment


def test_an_old_run_directory_resumes_with_the_same_settings(tmp_path):
  experiment = _old_run_dir(tmp_path)
  assert rundir.check_resume(str(tmp_path), _saved(experiment, impala.Config()))


def test_an_old_run_directory_with_other_settings_names_the_field(tmp_path):
  experiment = _old_run_dir(tmp_path, every_steps=50)
  with pytest.raises(rundir.RunDirError, match=r'experiment\.checkpoint\.every_steps: '
                     r'50 -> 1000'):
    rundir.check_resume(str(tmp_path), _saved(experiment, impala.Config()))
