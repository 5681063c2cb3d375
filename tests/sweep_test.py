"""Seeds and grids: every trial its own program and run directory, one
results table; the Python experiment API."""

import os
import subprocess
import sys

import pandas as pd
import pytest
from scipy import stats

from repertory import experiment as experiment_lib
from repertory import follow
from repertory import sweep
from repertory.agents import impala

TINY = ('--lp_launch_type=local_mt', '--num_actors=1', '--envs_per_actor=2',
        '--max_actor_steps=200', '--eval_episodes=2',
        '--final_eval_episodes=2', '--eval_fraction=1',
        '--config.unroll_length=5', '--config.batch_size=2',
        '--config.max_queue_size=8', '--config.hidden_sizes=16')


def test_grid_and_trials():
  grid = sweep.parse_grid(['config.learning_rate=1e-3,3e-3', 'num_actors=2'])
  assert grid == {'config.learning_rate': ['1e-3', '3e-3'],
                  'num_actors': ['2']}
  runs = sweep.trials(grid, seeds=2, base_seed=5, logdir='/s')
  assert [(r['label'], r['seed']) for r in runs] == [
      ('learning_rate=1e-3_num_actors=2', 5),
      ('learning_rate=1e-3_num_actors=2', 6),
      ('learning_rate=3e-3_num_actors=2', 5),
      ('learning_rate=3e-3_num_actors=2', 6)]
  assert runs[1]['logdir'] == '/s/learning_rate=1e-3_num_actors=2/seed6'
  command = sweep.trial_command(['prog'], ['--env=catch'], runs[1])
  assert command == ['prog', '--env=catch', '--config.learning_rate=1e-3',
                     '--num_actors=2', '--seed=6',
                     '--logdir=/s/learning_rate=1e-3_num_actors=2/seed6']


@pytest.mark.parametrize('spec, message', [
    ('learning_rate', 'write --grid=<flag>=<v1>,<v2>'),
    ('seed=1,2', 'set by the sweep itself')])
def test_bad_grid_is_one_clear_error(spec, message):
  with pytest.raises(ValueError, match=message):
    sweep.parse_grid([spec])


@pytest.mark.timeout(900)
def test_seeds_from_one_command_give_a_table(tmp_path):
  logdir = str(tmp_path / 'sweep')
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.run', *TINY, '--seeds=2',
       f'--logdir={logdir}'], capture_output=True, text=True, timeout=800)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  table = pd.read_csv(os.path.join(logdir, 'sweep.csv'))
  assert list(table['seed']) == [0, 1]
  for _, row in table.iterrows():
    assert row['logdir'] == os.path.join(logdir, 'default', f'seed{row.seed}')
    assert os.path.exists(os.path.join(row['logdir'], 'config.json'))
    assert 200 <= row['actor_steps'] <= 202
  assert 'sweep.csv' in result.stdout
  assert 'mean over seeds  default: ' in result.stdout
  assert '(95%, n=2)' in result.stdout


def test_interval_is_students_t():
  mean, half, n = sweep.interval([1.0, 2.0, 3.0, None])
  assert (mean, n) == (2.0, 3)
  assert half == pytest.approx(stats.t.ppf(0.975, 2) / 3 ** 0.5)
  assert sweep.interval([5.0])[1] != sweep.interval([5.0])[1]  # nan


_FAILING_TRIAL = 'import sys; print("out", sys.argv[1:]); sys.exit(3)'


def test_a_failed_trial_is_a_row_with_its_error(tmp_path):
  logdir = str(tmp_path / 'sweep')
  table = sweep.run_sweep([], [sys.executable, '-c', _FAILING_TRIAL],
                          seeds=2, logdir=logdir)
  assert list(table['seed']) == [0, 1]
  assert list(table['error']) == ['exit status 3, no results.json'] * 2
  assert pd.read_csv(os.path.join(logdir, 'sweep.csv'))['error'].notna().all()


def test_a_trial_that_finished_its_budget_is_not_run_again(tmp_path, capsys):
  logdir = str(tmp_path / 'sweep')
  run_dir = os.path.join(logdir, 'default', 'seed0')
  os.makedirs(run_dir)
  with open(os.path.join(run_dir, 'results.json'), 'w') as f:
    f.write('{"actor_steps": 500}')
  with open(os.path.join(run_dir, 'config.json'), 'w') as f:
    f.write('{"experiment": {"max_actor_steps": 500}}')
  program = [sys.executable, '-c', _FAILING_TRIAL]
  table = sweep.run_sweep([], program, logdir=logdir, max_actor_steps=500)
  assert 'finished; not run again' in capsys.readouterr().out
  assert list(table['actor_steps']) == [500]
  sweep.run_sweep([], program, logdir=logdir, max_actor_steps=800)
  assert 'finished; not run again' not in capsys.readouterr().out  # Raised.
  sweep.run_sweep([], program, logdir=logdir, max_actor_steps=800,
                  points=[('default', {'max_actor_steps': '400'})])
  assert 'finished; not run again' in capsys.readouterr().out  # The point's.


def test_a_tune_trial_s_output_goes_to_its_file_run_after_run(tmp_path):
  output_file = str(tmp_path / sweep.OUTPUT_FILE)
  command = [sys.executable, '-c', _FAILING_TRIAL, '--seed=7']
  for _ in range(2):  # A trial run again adds to the file.
    result = sweep._run_trial(command, str(tmp_path), 100, output_file)  # pylint: disable=protected-access
    assert result == {'error': 'exit status 3, no results.json (its output: '
                               f'{output_file})'}
  with open(output_file) as f:
    lines = f.read().splitlines()
  assert lines == [f'repertory.sweep: {" ".join(command)}',
                   "out ['--seed=7']"] * 2


def test_run_experiment_returns_results_and_progress(tmp_path, capsys):
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='catch', num_actors=1, envs_per_actor=2,
      max_actor_steps=300, eval_episodes=2,
      final_eval_episodes=2, eval_fraction=1.0, eval_every_steps=100,
      logdir=str(tmp_path), launch_type='test_mt',
      progress_every_seconds=0.2)
  config = impala.Config(unroll_length=4, batch_size=2, hidden_sizes=(16,),
                         max_queue_size=8)
  rows = []
  result = experiment_lib.run_experiment(config, experiment,
                                         on_progress=rows.append)
  assert 300 <= result.results['actor_steps'] <= 301
  # The rows were streamed as the run went: the same as progress.csv's.
  written = follow.read_rows(os.path.join(tmp_path, 'progress.csv'))
  assert [(r['actor_steps'], r['wall_seconds']) for r in rows] == [
      (r['actor_steps'], r['wall_seconds']) for r in written]
  assert any(row.get('eval_return_mean') is not None for row in rows)
  assert result.results['eval_episodes'] == 2
  assert os.path.exists(os.path.join(tmp_path, 'config.json'))
  evaluations = result.evaluations()
  assert len(evaluations) >= 1
  assert evaluations['actor_steps'].iloc[-1] == result.results['actor_steps']
  assert 'actor_steps=' in capsys.readouterr().out  # Progress was shown.
