"""A selfplay run directory resumes with the settings it was started with
(selfplay's own `checkpoint_every_steps` shares a name with a former agent
checkpoint field that `upgrade_saved_config` moves out of saved configs)."""

import dataclasses
import json

import pytest

from repertory import experiment as experiment_lib
from repertory import rundir
from repertory.agents import selfplay


def _saved(experiment, config):
  return {'agent': dataclasses.asdict(config),
          'experiment': dataclasses.asdict(experiment)}


def test_a_selfplay_run_resumes_with_the_same_settings(tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env='openspiel:kuhn_poker', logdir=str(tmp_path))
  config = selfplay.Config(policy_loss='mmd', magnet_update_steps=300)
  (tmp_path / 'config.json').write_text(
      json.dumps(_saved(experiment, config), default=str))
  assert rundir.check_resume(str(tmp_path), _saved(experiment, config))
  with pytest.raises(rundir.RunDirError, match=r'agent\.magnet_strength: 0\.1 -> 0\.5'):
    rundir.check_resume(str(tmp_path), _saved(
        experiment, dataclasses.replace(config, magnet_strength=0.5)))
