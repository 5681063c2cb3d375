"""bsuite's memory experiments: the sweep's settings and budgets, our
episodes.csv as the rows bsuite's own CSV logging wrapper writes (and the
same bsuite score), the command-line sweep (rerun: finished settings are
not run again) and the results page's bsuite section."""

import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from bsuite import sweep as bsuite_sweep
from bsuite.experiments.memory_len import analysis
from bsuite.experiments.memory_len import memory_len
from bsuite.logging import csv_load
from bsuite.logging import csv_logging
from bsuite.utils import wrappers

from repertory import experiment as experiment_lib
from repertory import results
from repertory.agents import impala
from repertory.components.evaluation import progress
from repertory.results import bsuite

TINY_IMPALA = dict(unroll_length=4, batch_size=2, hidden_sizes=(16,),
                   max_queue_size=8)


def test_sweep_points_are_bsuite_s_settings_and_episodes():
  points = bsuite.sweep_points('memory_len')
  ids = [i for i in bsuite_sweep.SETTINGS if i.startswith('memory_len/')]
  assert len(points) == len(ids) == 23
  for (label, flags), setting in zip(points, ids):
    length = bsuite_sweep.SETTINGS[setting]['memory_length']
    assert label == setting.replace('/', '-')
    assert flags == {'env': f'bsuite:{setting}', 'max_actor_steps': str(
        analysis.NUM_EPISODES * (length + 2)), 'stop_at_return': 'never'}
  assert [(label, flags['max_actor_steps']) for label, flags in
          bsuite.sweep_points('memory_len/3,memory_len/0', episodes=7)] == [
              ('memory_len-3', '42'), ('memory_len-0', '21')]


@pytest.mark.parametrize('spec, message', [
    ('catch', "'catch' is not one of memory_len, memory_size"),
    ('memory_len/23', 'memory_len/0 to memory_len/22'),
    (',', 'name an experiment')])
def test_bad_sweep_is_one_line(spec, message):
  with pytest.raises(bsuite.BsuiteError, match=message):
    bsuite.sweep_points(spec)


def _play(env, episodes, oracle, rng):
  """Plays `episodes` episodes: the right answer (remembered from the first
  observation) if `oracle`, else random actions; (returns, lengths)."""
  returns, lengths = [], []
  for _ in range(episodes):
    timestep = env.reset()
    cue, total, steps = timestep.observation[0, 2], 0.0, 0
    while not timestep.last():
      action = int(cue > 0) if oracle else int(rng.integers(2))
      timestep = env.step(action)
      total, steps = total + timestep.reward, steps + 1
    returns.append(total)
    lengths.append(steps)
  return returns, lengths


def _same_frames(ours, theirs):
  key = ['bsuite_id', 'episode']
  ours = ours.drop(columns='results_dir').sort_values(key).reset_index(
      drop=True)
  theirs = theirs.drop(columns='results_dir').sort_values(key).reset_index(
      drop=True)
  pd.testing.assert_frame_equal(ours[list(theirs.columns)], theirs)


def test_episodes_csv_gives_bsuite_s_rows_and_score(tmp_path):
  """A real memory_len environment in bsuite's CSV logging wrapper, every
  episode logged and (a second one, same seed and actions) bsuite's default
  log-spaced logging; the same episodes written to episodes.csv by the run
  monitor's writer. Setting 0 is answered right, setting 2 at random."""
  episodes, ours, rng = 120, [], np.random.default_rng(0)
  for setting, oracle in (('memory_len/0', True), ('memory_len/2', False)):
    kwargs = dict(bsuite_sweep.SETTINGS[setting])
    every = wrappers.Logging(
        memory_len.load(seed=3, **kwargs),
        csv_logging.Logger(setting, str(tmp_path / 'every')), log_every=True)
    spaced = csv_logging.wrap_environment(
        memory_len.load(seed=3, **kwargs), setting, str(tmp_path / 'spaced'))
    state = rng.bit_generator.state
    returns, lengths = _play(every, episodes, oracle, rng)
    rng.bit_generator.state = state
    assert _play(spaced, episodes, oracle, rng) == (returns, lengths)
    run_dir = str(tmp_path / setting.replace('/', '-'))
    files = progress.ProgressFiles(run_dir, 1, time.time())
    for start in range(0, episodes, 50):  # As the monitor gets them.
      files.episodes(returns[start:start + 50], lengths[start:start + 50])
    files.close()
    ours.append(bsuite.frame(run_dir, setting))
  _same_frames(pd.concat(ours), csv_load.load_one_result_set(
      str(tmp_path / 'every')))
  theirs = csv_load.load_one_result_set(str(tmp_path / 'spaced'))
  assert len(theirs) < len(pd.concat(ours))  # Log-spaced rows only.
  assert bsuite.score(ours) == analysis.score(theirs) == 0.5
  assert bsuite.score(ours[:1]) == 1.0 and bsuite.score(ours[1:]) == 0.0


_LOGGED = {}


def logged_memory_len(seed=None):
  """bsuite:memory_len/0 in bsuite's CSV logging wrapper (every episode),
  its file under `_LOGGED['root']/seed<seed>`."""
  env = memory_len.load(seed=seed, **bsuite_sweep.SETTINGS['memory_len/0'])
  logger = csv_logging.Logger('memory_len/0', os.path.join(
      _LOGGED['root'], f'seed{seed}'), overwrite=True)
  return wrappers.Logging(env, logger, log_every=True)


def test_a_real_run_s_episodes_are_what_bsuite_s_logger_saw(tmp_path):
  """The actor's environment is wrapped by bsuite's logger: the run's
  episodes.csv gives the rows it wrote."""
  _LOGGED['root'] = str(tmp_path / 'bsuite')
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env=logged_memory_len, num_actors=1, envs_per_actor=1,
      max_actor_steps=300, eval_every_steps=0, final_eval_episodes=2,
      eval_fraction=1.0, logdir=str(tmp_path / 'run'), launch_type='test_mt')
  experiment_lib.run_experiment(impala.Config(**TINY_IMPALA), experiment)
  ours = bsuite.frame(experiment.logdir, 'memory_len/0')
  theirs = csv_load.load_one_result_set(os.path.join(
      _LOGGED['root'], f'seed{experiment.actor_seed(0)}'))
  assert len(ours) >= 95  # 2 steps and the next episode's start.
  # The actor may end an episode past the budget that the monitor never got.
  assert len(ours) <= len(theirs) <= len(ours) + 2
  _same_frames(ours, theirs.iloc[:len(ours)])


@pytest.mark.timeout(900)
def test_the_sweep_runs_each_setting_once_and_the_page_scores_it(tmp_path):
  logdir = str(tmp_path / 'sweep')
  command = [sys.executable, '-m', 'repertory.run', '--agent=impala',
             '--bsuite_sweep=memory_len/0,memory_len/1',
             '--bsuite_episodes=20', '--lp_launch_type=local_mt',
             '--num_actors=1', '--envs_per_actor=2', '--final_eval_episodes=2',
             '--eval_fraction=1', '--eval_every_steps=0',
             *(f'--config.{k}={v}' for k, v in TINY_IMPALA.items()
               if k != 'hidden_sizes'), '--config.hidden_sizes=16',
             f'--logdir={logdir}']
  first = subprocess.run(command, capture_output=True, text=True, timeout=800)
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
  played = []
  for setting, steps in (('memory_len-0', 60), ('memory_len-1', 80)):
    run_dir = os.path.join(logdir, setting, 'seed0')
    counted = results.runs_lib.read_run(run_dir).results['actor_steps']
    assert steps <= counted <= steps + 2
    played.append(len(bsuite.frame(run_dir, setting.replace('-', '/'))))
    assert 18 <= played[-1] <= 20
  again = subprocess.run(command, capture_output=True, text=True, timeout=300)
  assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
  assert again.stdout.count('finished; not run again') == 2
  out = str(tmp_path / 'page.md')
  results.write([logdir], out, 'python -m repertory.results sweep')
  with open(out) as f:
    text = f.read()
  assert '## bsuite' in text and '### `bsuite:memory_len`' in text
  span = (f'{min(played)}' if min(played) == max(played) else
          f'{min(played)}–{max(played)}')
  assert f'| impala | 1 | 2 of 23 | {span} |' in text
  assert '| `memory_len/1` | 2 |' in text
  assert ' --bsuite_sweep=memory_len/0,memory_len/1 ' in text  # sweep.json


def test_a_sweep_with_env_is_refused_before_anything_is_written(tmp_path):
  logdir = str(tmp_path / 'sweep')
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.run', '--bsuite_sweep=memory_len',
       '--env=catch', f'--logdir={logdir}'], capture_output=True, text=True,
      timeout=300)
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      'repertory.run: error: --env with --bsuite_sweep: the sweep sets the '
      'environment and the budget of each setting.')
  assert not os.path.exists(logdir)
