"""Resuming a run directory with a different config is refused, naming the
differing fields, before anything starts."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from repertory import experiment as experiment_lib
from repertory import rundir
from repertory.agents import impala


def test_config_differences_names_nested_fields_and_allows_budgets():
  old = {'agent': {'learning_rate': 0.001, 'hidden_sizes': [64, 64]},
         'experiment': {'seed': 0, 'max_actor_steps': 100}}
  new = {'agent': {'learning_rate': 0.5, 'hidden_sizes': [64, 64]},
         'experiment': {'seed': 1, 'max_actor_steps': 200}}
  assert rundir.config_differences(old, new) == [
      'agent.learning_rate: 0.001 -> 0.5', 'experiment.seed: 0 -> 1']
  assert rundir.config_differences(old, old) == []


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


def test_a_field_added_since_the_run_resumes_at_its_default(tmp_path):
  # A run started before `passes_per_batch` existed has no such field in its
  # config.json; resuming it with the field at its default is the same run,
  # with the field set otherwise it is not.
  logdir = str(tmp_path)
  defaults = dataclasses.asdict(impala.Config())
  older = {k: v for k, v in defaults.items() if k != 'passes_per_batch'}
  with open(os.path.join(logdir, 'config.json'), 'w') as f:
    json.dump({'agent': older, 'experiment': {'seed': 0}}, f, default=str)

  same = {'agent': defaults, 'experiment': {'seed': 0}}
  assert rundir.check_resume(logdir, same, agent_defaults=defaults)
  changed = {'agent': dataclasses.asdict(impala.Config(passes_per_batch=4)),
             'experiment': {'seed': 0}}
  with pytest.raises(rundir.RunDirError, match=r"passes_per_batch: '<absent>' -> 4"):
    rundir.check_resume(logdir, changed, agent_defaults=defaults)
  # Without the defaults (an agent whose config needs arguments) any added
  # field is a difference, as before.
  with pytest.raises(rundir.RunDirError, match='passes_per_batch'):
    rundir.check_resume(logdir, same)


def test_config_differences_skips_only_absent_fields_at_their_default():
  defaults = {'agent': {'a': 1, 'b': [64, 64]}}
  old = {'agent': {'b': [64, 64]}}
  assert rundir.config_differences(old, {'agent': {'a': 1, 'b': [64, 64]}},
                                defaults=defaults) == []
  assert rundir.config_differences(old, {'agent': {'a': 2, 'b': [64, 64]}},
                                defaults=defaults) == [
                                    "agent.a: '<absent>' -> 2"]
  # A field present in both is compared whatever its default.
  assert rundir.config_differences({'agent': {'a': 2, 'b': [64, 64]}},
                                {'agent': {'a': 1, 'b': [64, 64]}},
                                defaults=defaults) == ['agent.a: 2 -> 1']


def test_an_experiment_field_added_since_the_run_resumes_at_its_default(
    tmp_path):
  # The same for the experiment's settings (as if `envs_per_actor` had been
  # added since the run started).
  logdir = str(tmp_path)
  experiment = experiment_lib.ExperimentConfig(logdir=logdir)
  saved = {'agent': dataclasses.asdict(impala.Config()),
           'experiment': dataclasses.asdict(experiment)}
  older = json.loads(json.dumps(saved, default=str))
  del older['experiment']['envs_per_actor']
  with open(os.path.join(logdir, 'config.json'), 'w') as f:
    json.dump(older, f)

  defaults = rundir.default_config(experiment)
  assert rundir.check_resume(logdir, saved, experiment_defaults=defaults)
  changed = dict(saved, experiment=dataclasses.asdict(
      dataclasses.replace(experiment, envs_per_actor=3)))
  with pytest.raises(rundir.RunDirError,
                     match=r"experiment.envs_per_actor: '<absent>' -> 3"):
    rundir.check_resume(logdir, changed, experiment_defaults=defaults)


def test_default_config_of_a_config_that_needs_arguments():
  # Only the fields that have a default are known defaults; a required field
  # added since a run has none, so it stays a difference.
  @dataclasses.dataclass
  class Needs:
    required: int
    rate: float = 0.5
    sizes: tuple = dataclasses.field(default_factory=lambda: (64, 64))

  assert rundir.default_config(Needs(required=1)) == {
      'rate': 0.5, 'sizes': (64, 64)}


def test_a_run_from_before_batched_items_resumes_only_as_it_ran(tmp_path):
  # IMPALA's runs wrote one Reverb item per environment before
  # `batched_items` existed (its default is now True): the replay checkpoint
  # holds such items, so the run resumes with --config.batched_items=false
  # and is refused, naming the field, with the new default.
  logdir = str(tmp_path)
  defaults = dataclasses.asdict(impala.Config())
  older = {k: v for k, v in defaults.items() if k != 'batched_items'}
  with open(os.path.join(logdir, 'config.json'), 'w') as f:
    json.dump({'agent': older, 'experiment': {'seed': 0}}, f, default=str)
  former = impala.Config.FORMER_DEFAULTS
  assert former == {'batched_items': False}
  with pytest.raises(rundir.RunDirError, match='batched_items: False -> True'):
    rundir.check_resume(logdir, {'agent': defaults, 'experiment': {'seed': 0}},
                     agent_defaults=defaults, agent_former_defaults=former)
  as_it_ran = dataclasses.asdict(impala.Config(batched_items=False))
  assert rundir.check_resume(logdir, {'agent': as_it_ran,
                                   'experiment': {'seed': 0}},
                          agent_defaults=defaults,
                          agent_former_defaults=former)
