"""Resuming a run directory with a different config is refused, naming the
differing fields, before anything starts."""

import dataclasses
import json
import os
import subprocess
import sys

from repertory import experiment as experiment_lib
from repertory import run
from repertory.agents import impala


def test_config_differences_names_nested_fields_and_allows_budgets():
  old = {'agent': {'learning_rate': 0.001, 'hidden_sizes': [64, 64]},
         'experiment': {'seed': 0, 'max_actor_steps': 100}}
  new = {'agent': {'learning_rate': 0.5, 'hidden_sizes': [64, 64]},
         'experiment': {'seed': 1, 'max_actor_steps': 200}}
  assert run.config_differences(old, new) == [
      'agent.learning_rate: 0.001 -> 0.5', 'experiment.seed: 0 -> 1']
  assert run.config_differences(old, old) == []


def test_rerun_with_a_changed_config_is_refused(tmp_path):
  logdir = str(tmp_path / 'run')
  os.makedirs(logdir)
  # What `python -m repertory.run --logdir=<logdir>` records (its defaults).
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='catch', num_actors=2, envs_per_actor=8,
      max_actor_steps=2_000_000,
      stop_at_return=experiment_lib.SOLVED_RETURNS['catch'],
      eval_episodes=20, seed=0, logdir=logdir, launch_type='local_mp')
  saved = {'agent': dataclasses.asdict(impala.Config()),
           'experiment': dataclasses.asdict(experiment)}
  with open(os.path.join(logdir, 'config.json'), 'w') as f:
    json.dump(saved, f, default=str)

  result = subprocess.run(
      [sys.executable, '-m', 'repertory.run', f'--logdir={logdir}',
       '--config.learning_rate=0.5', '--num_actors=3',
       '--max_actor_steps=5000'],
      capture_output=True, text=True, timeout=300,
      env={**os.environ, 'CUDA_VISIBLE_DEVICES': ''})
  assert result.returncode != 0
  message = result.stderr.strip().splitlines()[-1]
  assert 'different config' in message
  # Exactly the two changed fields; the budget may change on resume.
  default_rate = impala.Config().learning_rate
  assert message.endswith(
      f'Differing fields: agent.learning_rate: {default_rate} -> '
      '0.5; experiment.num_actors: 2 -> 3'), message
  assert sorted(os.listdir(logdir)) == ['config.json']  # Nothing started.
  with open(os.path.join(logdir, 'config.json')) as f:
    assert json.load(f) == json.loads(json.dumps(saved, default=str))
