"""`--seeds=N --lp_launch_type=ray`: the trials are Ray Tune trials on a real
Ray cluster (on loopback, with Ray's token authentication), each its own
program on that cluster, and one results table at the end."""

import os
import subprocess
import sys

import pandas as pd
import pytest

from repertory import sweep
from repertory import testing

TINY = ('--num_actors=1', '--envs_per_actor=2', '--max_actor_steps=200',
        '--eval_episodes=2', '--eval_every_steps=0',
        '--config.unroll_length=5', '--config.batch_size=2',
        '--config.max_queue_size=8', '--config.hidden_sizes=16')


@pytest.fixture
def cluster():
  with testing.loopback_ray_cluster(num_cpus=2) as cluster:
    yield cluster


@pytest.mark.timeout(600)  # Ray, Tune and two programs: ~40 s alone.
def test_seeds_on_ray_are_tune_trials_with_a_table(cluster, tmp_path):
  logdir = str(tmp_path / 'sweep')
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.run', *TINY, '--seeds=2',
       '--lp_launch_type=ray', f'--ray_address={cluster.address}',
       f'--logdir={logdir}'],
      capture_output=True, text=True, timeout=550)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  table = pd.read_csv(os.path.join(logdir, 'sweep.csv'))
  assert list(table['seed']) == [0, 1]
  assert 'error' not in table
  for _, row in table.iterrows():
    assert row['logdir'] == os.path.join(logdir, 'default', f'seed{row.seed}')
    assert 200 <= row['actor_steps'] <= 201
    with open(os.path.join(row['logdir'], 'results.json')) as f:
      assert '"launch_type": "ray"' in f.read()
    # Its program's output went to its file, not to the sweep's terminal.
    with open(os.path.join(row['logdir'], sweep.OUTPUT_FILE)) as f:
      output = f.read()
    assert output.startswith('repertory.sweep: ') and '"wall_seconds"' in output
  # Tune ran them: its experiment directory holds one trial per seed.
  trials = [d for d in os.listdir(os.path.join(logdir, 'tune'))
            if d.startswith('_tune_trainable')]
  assert len(trials) == 2, os.listdir(os.path.join(logdir, 'tune'))
  # The table, printed at the end, after no line of a trial's program.
  assert '"wall_seconds"' not in result.stdout
  assert 'seed' in result.stdout and 'actor_steps' in result.stdout
  assert result.stdout.rstrip().endswith(
      f'curves: python -m repertory.plot {logdir}')
