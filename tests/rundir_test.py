"""The run directory: one-line refusals, the finished-run check, attempts."""

import json
import os
import subprocess
import sys

import pytest

from repertory import rundir


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)


def _saved(max_actor_steps=1000, num_actors=2, launch_type='local_mt'):
  return {'agent': {'learning_rate': 0.001},
          'experiment': {'max_actor_steps': max_actor_steps,
                         'num_actors': num_actors, 'envs_per_actor': 8,
                         'launch_type': launch_type}}


def _one_line(error):
  message = str(error.value)
  assert '\n' not in message
  return message


# --- checks -----------------------------------------------------------------


def test_logdir_that_is_a_file_or_under_one_or_unwritable(tmp_path):
  a_file = tmp_path / 'file'
  a_file.write_text('x')
  with pytest.raises(rundir.RunDirError) as error:
    rundir.check_writable(str(a_file))
  assert _one_line(error).startswith(f'--logdir {a_file} is an existing file')
  with pytest.raises(rundir.RunDirError) as error:
    rundir.check_writable(str(a_file / 'run'))
  assert 'Not a directory' in _one_line(error)
  # /proc refuses new entries even to root.
  with pytest.raises(rundir.RunDirError) as error:
    rundir.check_writable('/proc/repertory-test/run')
  assert '/proc/repertory-test' in _one_line(error)
  rundir.check_writable(str(tmp_path / 'new' / 'run'))
  assert os.listdir(tmp_path / 'new' / 'run') == []   # No probe file left.


@pytest.mark.parametrize('name,text,expected', [
    ('config.json', '{"agent": {"learning_rate": 0.0', 'truncated or corrupt'),
    ('config.json', '[1, 2]', 'holds a list, not a dict'),
    ('config.json', '{"agent": {}}', 'no "experiment" settings'),
    ('counts.json', '{"actor_steps": 12', 'truncated or corrupt'),
    ('counts.json', '{"actor_steps": "12"}', "['actor_steps'] are not numbers"),
])
def test_corrupt_run_files_are_named(tmp_path, name, text, expected):
  _write(str(tmp_path / 'config.json'), json.dumps(_saved()))
  _write(str(tmp_path / name), text)
  with pytest.raises(rundir.RunDirError) as error:
    rundir.preflight(str(tmp_path), _saved())
  message = _one_line(error)
  assert str(tmp_path / name) in message and expected in message


def test_run_files_without_config_is_not_a_run_directory(tmp_path):
  os.makedirs(tmp_path / 'checkpoints' / 'latest')
  with pytest.raises(rundir.RunDirError, match='not a valid run directory'):
    rundir.preflight(str(tmp_path), _saved())
  # Unrelated files are not run files: a new run may start there.
  other = tmp_path / 'other'
  _write(str(other / 'notes.txt'), 'x')
  assert rundir.preflight(str(other), _saved()) == (False, [])


@pytest.mark.parametrize(
    'actor_steps,finished_budget,new_budget,allowed',
    [(500, None, 1000, True),     # Interrupted: resume.
     (1000, None, 1000, False),   # Budget spent (results never written).
     (1000, None, 2000, True),    # ... and raised.
     (300, 1000, 1000, False),    # Finished early (stop_at_return).
     (300, 1000, 2000, True),     # ... budget raised: continue.
     (5000, 1000, 2000, False),   # Raised, but below the steps taken.
     (5000, 1000, 8000, True)])
def test_finished_run_needs_a_larger_budget(tmp_path, actor_steps,
                                            finished_budget, new_budget,
                                            allowed):
  logdir = str(tmp_path)
  _write(os.path.join(logdir, 'config.json'), json.dumps(_saved()))
  _write(os.path.join(logdir, 'counts.json'),
         json.dumps({'actor_steps': actor_steps}))
  if finished_budget is not None:
    attempt = rundir.start_attempt(logdir, _saved(finished_budget))
    _write(os.path.join(logdir, 'results.json'), '{"eval_return_mean": 1}')
    assert attempt.end() == {'eval_return_mean': 1}
  if allowed:
    rundir.check_budget(logdir, new_budget)
    return
  with pytest.raises(rundir.RunDirError) as error:
    rundir.check_budget(logdir, new_budget)
  message = _one_line(error)
  assert f'after {actor_steps} actor steps' in message or (
      f'already took {actor_steps} actor steps' in message)
  assert 'rerun with a larger budget, e.g. --max_actor_steps=' in message


def test_results_before_attempts_were_kept_count_as_finished(tmp_path):
  _write(str(tmp_path / 'config.json'), json.dumps(_saved(1000)))
  _write(str(tmp_path / 'results.json'), '{}')
  with pytest.raises(rundir.RunDirError, match='finished'):
    rundir.check_budget(str(tmp_path), 1000)
  rundir.check_budget(str(tmp_path), 2000)


def test_an_interrupted_attempt_after_a_finished_one_resumes(tmp_path):
  logdir = str(tmp_path)
  _write(os.path.join(logdir, 'counts.json'), '{"actor_steps": 1200}')
  first = rundir.start_attempt(logdir, _saved(1000))
  _write(os.path.join(logdir, 'results.json'), '{"attempt": 1}')
  first.end()
  second = rundir.start_attempt(logdir, _saved(5000))
  assert second.end() is None            # Stopped before it finished.
  rundir.check_budget(logdir, 5000)       # The same command resumes it.


def test_oversubscription_warns_with_the_alternatives():
  message = rundir.oversubscription(64, 8, 'local_mp', cores=2)
  assert message.startswith('--num_actors=64 starts 64 actor processes on 2 '
                            'CPU cores')
  assert '--num_actors=2 --envs_per_actor=256' in message
  assert '--actor_processes=1' in message
  assert '--envs_per_actor=256' in rundir.oversubscription(
      64, 8, 'local_mt', cores=2)
  assert rundir.oversubscription(8, 8, 'local_mp', cores=2) is None
  shared = rundir.oversubscription(64, 8, 'local_mp', cores=2, processes=1)
  assert shared.startswith('--num_actors=64 starts 64 actors (threads of 1 '
                           'process) on 2 CPU cores'), shared
  assert '--actor_processes' not in shared
  assert '--actor_processes=1' in rundir.oversubscription(
      64, 8, 'local_mp', cores=2, processes=4)
  assert rundir.oversubscription(64, 8, 'ray', cores=2) is None


# --- attempts ---------------------------------------------------------------


def test_results_are_kept_per_attempt_and_never_moved(tmp_path):
  logdir = str(tmp_path)
  results = os.path.join(logdir, 'results.json')
  first = rundir.start_attempt(logdir, _saved(1000), argv=['run', '1'])
  assert first.number == 1
  _write(results, '{"eval_return_mean": 0.5}')
  assert first.end() == {'eval_return_mean': 0.5}

  failed = rundir.start_attempt(logdir, _saved(2000), argv=['run', '2'])
  assert failed.end() is None                   # Wrote no results.
  with open(results) as f:
    assert json.load(f) == {'eval_return_mean': 0.5}

  third = rundir.start_attempt(logdir, _saved(3000))
  _write(results, '{"eval_return_mean": 0.9}')
  assert third.end() == {'eval_return_mean': 0.9}

  assert rundir.attempts(logdir) == [1, 2, 3]
  def attempt_file(n, name):
    with open(os.path.join(logdir, 'attempts', str(n), name)) as f:
      return json.load(f)
  assert attempt_file(1, 'results.json') == {'eval_return_mean': 0.5}
  assert not os.path.exists(os.path.join(logdir, 'attempts', '2',
                                         'results.json'))
  assert attempt_file(3, 'results.json') == {'eval_return_mean': 0.9}
  assert attempt_file(1, 'attempt.json')['status'] == 'finished'
  assert attempt_file(1, 'attempt.json')['argv'] == ['run', '1']
  assert attempt_file(2, 'attempt.json')['status'] == 'ended without results'
  assert attempt_file(2, 'config.json') == _saved(2000)
  with open(os.path.join(logdir, 'config.json')) as f:
    assert json.load(f) == _saved(3000)           # The latest attempt's.


# --- `python -m repertory.run`: one line on stderr --------------------------


def _run(*args):
  return subprocess.run(
      [sys.executable, '-m', 'repertory.run', '--lp_launch_type=local_mt',
       *args], capture_output=True, text=True, timeout=300,
      env={**os.environ, 'CUDA_VISIBLE_DEVICES': ''})


def _refused_with_one_line(result):
  assert result.returncode != 0
  assert 'Traceback' not in result.stderr, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr
  assert lines[0].startswith('repertory.run: error: '), lines
  return lines[0]


def test_run_refuses_a_bad_logdir_with_one_line(tmp_path):
  a_file = tmp_path / 'file'
  a_file.write_text('x')
  line = _refused_with_one_line(_run(f'--logdir={a_file}'))
  assert f'--logdir {a_file} is an existing file' in line
  line = _refused_with_one_line(_run('--logdir=/proc/repertory-test/run'))
  assert '--logdir /proc/repertory-test/run is not writable' in line


def test_run_refuses_corrupt_run_files_with_one_line(tmp_path):
  logdir = tmp_path / 'run'
  _write(str(logdir / 'config.json'), '{"agent": {"learning_rate": 0.0')
  line = _refused_with_one_line(_run(f'--logdir={logdir}'))
  assert f'{logdir}/config.json is truncated or corrupt' in line

  invalid = tmp_path / 'invalid'
  _write(str(invalid / 'counts.json'), '{"actor_steps": 10}')
  line = _refused_with_one_line(_run(f'--logdir={invalid}'))
  assert f'{invalid} is not a valid run directory' in line
  assert sorted(os.listdir(invalid)) == ['counts.json']   # Nothing written.


def test_run_warns_about_too_many_actors_before_anything_starts(tmp_path):
  logdir = tmp_path / 'run'
  # A config that differs: the run is refused right after the warning.
  _write(str(logdir / 'config.json'), json.dumps(
      {'agent': {'learning_rate': 123.0}, 'experiment': {}}))
  cores = os.cpu_count()
  result = _run(f'--logdir={logdir}', f'--num_actors={4 * cores + 1}')
  lines = result.stderr.strip().splitlines()
  assert lines[0].startswith(f'repertory: warning: --num_actors='
                             f'{4 * cores + 1} starts'), result.stderr
  assert '--envs_per_actor=' in lines[0]
  assert lines[1].startswith('repertory.run: error: ') and len(lines) == 2
  assert sorted(os.listdir(logdir)) == ['config.json']


def test_processor_names_the_model_with_its_family_and_number(tmp_path):
  cpuinfo = tmp_path / 'cpuinfo'
  cpuinfo.write_text(
      'processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\n'
      'model\t\t: 2\nmodel name\t: AMD EPYC\n\n'
      'processor\t: 1\ncpu family\t: 25\nmodel\t\t: 1\n'
      'model name\t: Another\n\n')
  assert rundir.processor(str(cpuinfo)) == 'AMD EPYC (family 26, model 2)'
  cpuinfo.write_text('processor\t: 0\nmodel name\t: Some CPU\n')
  assert rundir.processor(str(cpuinfo)) == 'Some CPU'
  cpuinfo.write_text('processor\t: 0\nBogoMIPS\t: 100\n')
  assert rundir.processor(str(cpuinfo)) is None
  assert rundir.processor(str(tmp_path / 'missing')) is None


def test_an_attempt_keeps_the_thread_settings_it_ran_with(tmp_path,
                                                          monkeypatch):
  monkeypatch.setenv('TF_NUM_INTRAOP_THREADS', '1')
  monkeypatch.delenv('TF_NUM_INTEROP_THREADS', raising=False)
  monkeypatch.setenv('UNRELATED_SETTING', 'x')
  logdir = str(tmp_path / 'run')
  attempt = rundir.start_attempt(logdir, {'agent': 'impala'},
                                 argv=['repertory/run.py', '--seed=1'])
  with open(os.path.join(attempt.directory, 'attempt.json')) as f:
    record = json.load(f)
  assert record['environment'] == {'TF_NUM_INTRAOP_THREADS': '1'}
  assert rundir.command_line(record['argv'], record['environment']) == (
      'TF_NUM_INTRAOP_THREADS=1 python -m repertory.run --seed=1')
  assert rundir.command_line(['repertory/run.py', '--seed=1']) == (
      'python -m repertory.run --seed=1')
