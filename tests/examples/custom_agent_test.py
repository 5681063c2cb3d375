"""examples/custom_agent.py: its program in test_mt, its command line (the
built-in agents' flags), and learning catch (slow)."""

import csv
import glob
import json
import os
import subprocess
import sys

import pytest

from repertory import experiment as experiment_lib
from repertory import launch

TINY = dict(unroll_length=5, batch_size=2, max_queue_size=8, hidden_sizes=(16,))


def _experiment(tmp_path, **kwargs):
  values = dict(agent='a2c', env='catch', num_actors=2, envs_per_actor=2,
                max_actor_steps=10_000_000, eval_episodes=2,
                final_eval_episodes=2, eval_fraction=1.0,
                logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


def test_config_rejects_a_batch_larger_than_the_queue(load_example):
  a2c = load_example('custom_agent')
  with pytest.raises(ValueError, match='batch_size=9 must be in'):
    a2c.Config(batch_size=9, max_queue_size=8)


def test_program_runs_to_its_budget_in_test_mt(tmp_path, load_example):
  a2c = load_example('custom_agent')
  config = a2c.Config(**TINY)
  program = a2c.make_program(config, _experiment(tmp_path,
                                                 max_actor_steps=300))
  assert set(program.groups) == {'replay', 'counter', 'learner', 'monitor',
                                 'evaluator', 'actor'}
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=240)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['agent'] == 'a2c' and results['env'] == 'catch'
  assert results['actor_steps'] >= 300
  assert results['learner_steps'] >= 1
  assert results['policy_lag_mean'] is not None  # The learner counted lags.
  assert results['eval_episodes'] == 2  # The monitor evaluated with Policy.
  with open(os.path.join(tmp_path, 'learner', 'csv', 'learner.csv')) as f:
    rows = list(csv.DictReader(f))
  versions = [int(row['learner/version']) for row in rows]
  assert versions == list(range(1, len(rows) + 1))  # One version per step.
  assert float(rows[-1]['learner/charts/policy_lag']) >= 0  # The batch mean.
  # TensorBoard: the lags of each batch as a histogram; the queue's
  # samples per insert (each unroll is sampled at most once).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  plugins = {value.metadata.plugin_data.plugin_name
             for path in glob.glob(os.path.join(tmp_path, 'learner',
                                                'tensorboard', 'learner', '*'))
             for event in tf.compat.v1.train.summary_iterator(path)
             for value in event.summary.value
             if value.tag == 'learner/charts/policy_lag'}
  assert plugins == {'histograms'}
  assert 0 < results['tables/queue/samples_per_insert'] <= 1


def test_a_rerun_resumes_the_learner_and_the_budget(tmp_path, load_example):
  """The example checkpoints and resumes like a built-in agent."""
  a2c = load_example('custom_agent')
  config = a2c.Config(**TINY)
  first = experiment_lib.run_experiment(config, _experiment(
      tmp_path, max_actor_steps=300, stop_at_return='never',
      eval_every_steps=0))
  checkpoints = glob.glob(os.path.join(tmp_path, 'checkpoints', 'latest',
                                       'ckpt-*.index'))
  assert checkpoints  # The LearnerHost was given <logdir>/checkpoints.
  version = max(int(os.path.basename(p)[5:-6]) for p in checkpoints)
  with open(os.path.join(tmp_path, 'counts.json')) as f:
    counts = json.load(f)
  assert counts['actor_steps'] == first.results['actor_steps']

  second = experiment_lib.run_experiment(config, _experiment(
      tmp_path, max_actor_steps=600, stop_at_return='never',
      eval_every_steps=0))
  # The budget continued: 600 in all, not 300 more from 0.
  assert 600 <= second.results['actor_steps'] <= 604
  with open(os.path.join(tmp_path, 'attempts', '2', 'attempt.json')) as f:
    start = json.load(f)['counts_at_start']
  assert start['actor_steps'] == counts['actor_steps']
  # The learner went on from its checkpoint (versions never restart).
  with open(os.path.join(tmp_path, 'learner', 'csv', 'learner.csv')) as f:
    versions = [int(row['learner/version']) for row in csv.DictReader(f)]
  assert max(versions) > version
  assert second.results['learner_steps'] > first.results['learner_steps']


@pytest.mark.slow  # Ten to thirty seconds alone; a minute on a loaded machine.
def test_command_line_runs_to_its_budget_with_the_built_in_flags(
    tmp_path, example_path):
  logdir = os.path.join(tmp_path, 'run')
  result = subprocess.run(
      [sys.executable, example_path('custom_agent'),
       '--lp_launch_type=local_mt', '--env=catch', '--num_actors=2',
       '--envs_per_actor=2', '--max_actor_steps=300', '--eval_episodes=2',
       '--final_eval_episodes=2', '--eval_fraction=1',
       '--seed=1', f'--logdir={logdir}', '--config.unroll_length=5',
       '--config.batch_size=2', '--config.max_queue_size=8',
       '--config.hidden_sizes=16'],
      capture_output=True, text=True, timeout=240)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  assert results['agent'] == 'a2c' and results['env'] == 'catch'
  assert results['seed'] == 1
  assert results['actor_steps'] >= 300
  assert results['learner_steps'] >= 1
  assert results['policy_lag_mean'] is not None
  assert results['eval_episodes'] == 2
  with open(os.path.join(logdir, 'config.json')) as f:
    assert json.load(f)['agent']['unroll_length'] == 5


def test_a_bad_config_field_is_one_clear_error(tmp_path, example_path):
  logdir = os.path.join(tmp_path, 'run')
  result = subprocess.run(
      [sys.executable, example_path('custom_agent'), '--config.nope=1',
       f'--logdir={logdir}'], capture_output=True, text=True, timeout=120)
  assert result.returncode != 0
  assert "Unknown config field 'nope' for agent 'a2c'" in result.stderr
  assert not os.path.exists(logdir)


@pytest.mark.slow
def test_a2c_solves_catch_in_local_mt(tmp_path, load_example):
  a2c = load_example('custom_agent')
  experiment = _experiment(tmp_path, envs_per_actor=8, max_actor_steps=400_000,
                           stop_at_return=0.95, eval_episodes=20,
                           launch_type='local_mt', progress_every_seconds=5.0)
  program = a2c.make_program(a2c.Config(), experiment)
  launch.launch(program, launch_type='local_mt', termination_notice_secs=5)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['eval_return_mean'] >= 0.9, results
