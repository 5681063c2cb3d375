"""Tests of the learning-curve plot."""

import csv
import json
import os

import numpy as np
import pytest

from repertory import plot


def _write_run(directory, returns, seconds_per_row=1.0):
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, 'progress.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(
        f, ['actor_steps', 'wall_seconds', 'episode_return_mean'])
    writer.writeheader()
    writer.writerow({'actor_steps': 0, 'wall_seconds': 0,
                     'episode_return_mean': 'nan'})  # No episode yet.
    for i, value in enumerate(returns, start=1):
      writer.writerow({'actor_steps': 100 * i,
                       'wall_seconds': seconds_per_row * i,
                       'episode_return_mean': value})


def test_seeds_are_grouped_and_other_runs_are_not(tmp_path):
  for seed in range(3):
    _write_run(tmp_path / 'impala-catch' / f'seed{seed}', [0.1, 0.5])
  _write_run(tmp_path / 'seed-catch', [0.2, 0.3])  # The SEED agent: no suffix.
  groups = plot.group_runs(plot.find_runs([str(tmp_path)]))
  sizes = sorted(len(v) for v in groups.values())
  assert sizes == [1, 3]


def test_mean_and_range_keeps_every_point_of_every_curve():
  a = (np.array([0., 10.]), np.array([0., 10.]))
  b = (np.array([0., 5., 20.]), np.array([2., 2., 2.]))
  x, mean, lo, hi = plot.mean_and_range([a, b], num_points=10)
  np.testing.assert_allclose(x, [0, 5, 10, 20])
  np.testing.assert_allclose(mean, [1, 3.5, 6, 2])   # 20: only b covers it.
  np.testing.assert_allclose(lo, [0, 2, 2, 2])
  np.testing.assert_allclose(hi, [2, 5, 10, 2])
  # A later first evaluation (another seed's) does not cut the earliest.
  c = (np.array([7., 20.]), np.array([4., 4.]))
  x, mean, _, _ = plot.mean_and_range([b, c], num_points=10)
  assert x[0] == 0 and mean[0] == 2
  single = plot.mean_and_range([a], num_points=100)
  np.testing.assert_allclose(single[0], [0, 10])     # Its own points.


def test_rows_without_the_metric_are_skipped(tmp_path):
  _write_run(tmp_path / 'run', [0.5, 0.7])
  data = plot.read_progress(str(tmp_path / 'run'), 'episode_return_mean')
  np.testing.assert_allclose(data['actor_steps'], [100, 200])


def test_writes_a_png(tmp_path):
  for seed in range(2):
    _write_run(tmp_path / 'a' / f'seed{seed}', [0.1 * seed, 0.5, 0.9])
  _write_run(tmp_path / 'b', [0.0, 0.2, 0.4], seconds_per_row=2.0)
  out = plot.plot([str(tmp_path)], str(tmp_path / 'curves.png'))
  with open(out, 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'


def test_no_runs_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match='progress.csv'):
    plot.find_runs([str(tmp_path)])


def test_evaluation_rows_make_their_own_panel(tmp_path):
  for seed in range(3):
    run = tmp_path / 'sweep' / 'default' / f'seed{seed}'
    _write_run(run, [0.1, 0.5, 0.9])
    with open(run / 'progress.csv', 'a', newline='') as f:
      csv.writer(f).writerow([250, 2.5, ''])  # An evaluation row's columns...
    with open(run / 'progress.csv') as f:
      rows = list(csv.DictReader(f))
    for i, row in enumerate(rows):
      row['eval_return_mean'] = str(0.2 * i + seed) if i % 2 else ''
    with open(run / 'progress.csv', 'w', newline='') as f:
      writer = csv.DictWriter(f, list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)
  data = plot.read_progress(str(tmp_path / 'sweep' / 'default' / 'seed1'),
                            'eval_return_mean')
  np.testing.assert_allclose(data['eval_return_mean'], [1.2, 1.6])
  out = plot.plot([str(tmp_path / 'sweep')], str(tmp_path / 'c.png'))
  with open(out, 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'
  with pytest.raises(ValueError, match='No run has any of the columns'):
    plot.plot([str(tmp_path / 'sweep')], str(tmp_path / 'd.png'), 'nope')


def test_a_short_run_has_a_curve_and_the_plot_names_agent_and_env(tmp_path):
  run = tmp_path / 'short'
  _write_run(run, [0.25])                    # One progress row only.
  with open(run / 'results.json', 'w') as f:
    json.dump({'agent': 'impala', 'env': 'catch', 'actor_steps': 180,
               'wall_seconds': 1.6, 'episode_return_mean': 0.5}, f)
  data = plot.read_progress(str(run), 'episode_return_mean')
  np.testing.assert_allclose(data['actor_steps'], [100, 180])
  np.testing.assert_allclose(data['episode_return_mean'], [0.25, 0.5])
  assert plot.title([str(run)]) == 'impala on catch'
  out = plot.plot([str(run)], str(tmp_path / 'short.png'))
  with open(out, 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'


def test_help_names_only_flags_that_exist():
  from repertory import run  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  for flag in ('--seeds', '--logdir'):
    assert flag in plot.__doc__
    assert flag[2:] in flags.FLAGS, flag  # Defined by repertory.run.
  del run
