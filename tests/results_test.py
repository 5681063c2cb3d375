"""Tests of the results page (python -m repertory.results).

Run directories are written with the runner's own writers (rundir's
attempts, the monitor's CSV logger, results.json as the monitor writes it),
and one comes from a real short run."""

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import stats

from repertory import experiment
from repertory import results
from repertory import rundir
from repertory.components import loggers
from repertory.results import archive as archive_lib
from repertory.results import page
from repertory.results import runs as runs_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Final scores of three seeds of impala on catch.
EVAL = [0.2, 0.5, 0.9]
TRAIN = [0.1, 0.3, 0.35]
STEPS = [30_000, 40_000, 50_000]


def _write_run(logdir, agent='impala', env='catch', seed=0, eval_return=0.5,
               train_return=0.4, actor_steps=40_000, learning_rate=1e-3,
               flags=()):
  """A finished run directory, written as `python -m repertory.run` does
  (its command: agent, env, seed, logdir, then `flags`)."""
  logdir = str(logdir)
  config = experiment.ExperimentConfig(agent=agent, env=env, seed=seed,
                                       logdir=logdir)
  saved = {'agent': {'learning_rate': learning_rate},
           'experiment': json.loads(json.dumps(dataclasses.asdict(config),
                                               default=str))}
  argv = [os.path.join(REPO, 'repertory', 'run.py'), f'--agent={agent}',
          f'--env={env}', f'--seed={seed}', f'--logdir={logdir}', *flags]
  os.makedirs(logdir, exist_ok=True)
  attempt = rundir.start_attempt(logdir, saved, argv)
  progress = loggers.CSVLogger(logdir, 'progress')
  for i in range(1, 5):
    steps = actor_steps * i // 4
    progress.write({'actor_steps': steps, 'learner_steps': i * 10,
                    'wall_seconds': float(i),
                    'episode_return_mean': train_return * i / 4})
    progress.write({'actor_steps': steps, 'learner_steps': i * 10,
                    'wall_seconds': float(i), 'eval_return_mean':
                    eval_return * i / 4, 'eval_episodes': 20})
  progress.close()
  summary = {'agent': agent, 'env': env, 'seed': seed,
             'actor_steps': actor_steps, 'episode_return_mean': train_return,
             'eval_return_mean': eval_return, 'eval_episodes': 20,
             'wall_seconds': 4.0}
  with open(os.path.join(logdir, 'results.json'), 'w') as f:
    f.write(json.dumps(summary, indent=2, sort_keys=True))
  assert attempt.end() is not None
  return logdir


def _write_seeds(root, **kwargs):
  for seed, (e, t, s) in enumerate(zip(EVAL, TRAIN, STEPS)):
    _write_run(root / f'seed{seed}', seed=seed, eval_return=e,
               train_return=t, actor_steps=s, **kwargs)


def _table_rows(text):
  """The summary table's rows as lists of cells."""
  lines = text.split('\n')
  start = lines.index(next(l for l in lines if l.startswith('| task |')))
  rows = []
  for line in lines[start + 2:]:
    if not line.startswith('|'):
      break
    rows.append([c.strip() for c in line.strip('|').split('|')])
  return rows


def _cell(values):
  """mean [low, high] computed independently: numpy and scipy's t."""
  x = np.array(values)
  low, high = stats.t.interval(0.95, len(x) - 1, loc=x.mean(),
                               scale=stats.sem(x))
  return f'{x.mean():.2f} [{low:.2f}, {high:.2f}]'


def _generate(paths, out, *flags):
  return subprocess.run(
      [sys.executable, '-m', 'repertory.results', *map(str, paths),
       f'--out={out}', *flags], capture_output=True, text=True, cwd=REPO,
      timeout=300, check=False)


def test_table_numbers_match_an_independent_computation(tmp_path):
  _write_seeds(tmp_path / 'runs' / 'impala-catch')
  out = tmp_path / 'page' / 'results.md'
  results.write([str(tmp_path / 'runs')], str(out), 'the command')
  text = out.read_text()
  (row,) = _table_rows(text)
  assert row[0] == '`catch`' and row[1].startswith('[impala](#catch-impala)')
  assert row[2] == '3'
  assert row[3] == _cell(EVAL)
  assert row[4] == _cell(TRAIN)
  assert row[5] == '—'  # No published reference for catch.
  assert row[6] == f'{int(np.mean(STEPS)):,}'
  assert '![Learning curves on catch](results/catch.png)' in text
  assert (tmp_path / 'page' / 'results' / 'catch.png').read_bytes()[:8] == (
      b'\x89PNG\r\n\x1a\n')
  for seed in range(3):  # Each seed's exact command.
    logdir = tmp_path / 'runs' / 'impala-catch' / f'seed{seed}'
    assert (f'python -m repertory.run --agent=impala --env=catch '
            f'--seed={seed} --logdir={logdir}\n') in text


def test_one_seed_has_no_interval():
  assert page.score_cell([0.7]) == '0.70 (1 seed)'


def test_configs_variants_and_references_are_rows_of_their_own(tmp_path):
  _write_seeds(tmp_path / 'impala-catch')
  _write_run(tmp_path / 'impala-catch-lr' / 'seed0', learning_rate=3e-3)
  _write_run(tmp_path / 'apex-breakout' / 'seed0', agent='apex',
             env='minatar:breakout', eval_return=12.0, train_return=11.0)
  out = tmp_path / 'results.md'
  results.write([str(tmp_path)], str(out), 'the command')
  rows = _table_rows(out.read_text())
  assert [(r[0], r[1].split('](')[0], r[2], r[5]) for r in rows] == [
      ('`catch`', '[impala (config.learning_rate=0.001)', '3', '—'),
      ('`catch`', '[impala (config.learning_rate=0.003)', '1', '—'),
      ('`minatar:breakout`', '[apex', '1', '17.50'),
  ]
  assert rows[2][3] == '12.00 (1 seed)'
  assert (tmp_path / 'results' / 'minatar-breakout.png').exists()
  assert runs_lib.reference('minatar:space_invaders') == 185.0


def test_same_runs_give_the_same_bytes(tmp_path):
  _write_seeds(tmp_path / 'runs' / 'impala-catch')
  _write_run(tmp_path / 'runs' / 'ppo-breakout' / 'seed0', agent='ppo',
             env='minatar:breakout')
  out = tmp_path / 'docs' / 'results.md'
  files = ('results.md', 'results/catch.png', 'results/minatar-breakout.png')
  first = _generate([tmp_path / 'runs'], out)
  assert first.returncode == 0, first.stderr
  before = {f: (tmp_path / 'docs' / f).read_bytes() for f in files}
  os.remove(tmp_path / 'docs' / 'results' / 'catch.png')
  second = _generate([tmp_path / 'runs'], out)
  assert second.returncode == 0, second.stderr
  assert {f: (tmp_path / 'docs' / f).read_bytes() for f in files} == before
  header = (f'python -m repertory.results {tmp_path / "runs"} '
            f'--out={out}')
  assert header in before['results.md'].decode()


def test_unfinished_runs_are_left_out_and_named(tmp_path):
  _write_run(tmp_path / 'done')
  os.makedirs(tmp_path / 'killed')
  rundir.start_attempt(str(tmp_path / 'killed'),
                       {'agent': {}, 'experiment': {'agent': 'impala',
                                                    'env': 'catch'}}, ['x'])
  out = tmp_path / 'results.md'
  results.write([str(tmp_path)], str(out), 'the command')
  text = out.read_text()
  assert len(_table_rows(text)) == 1
  assert f'- `{tmp_path / "killed"}`' in text.split('## Left out')[1]


@pytest.mark.parametrize('case', ['missing', 'empty', 'corrupt', 'out',
                                  'documented', 'bsuite'])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, case):
  out = tmp_path / 'page' / 'results.md'
  path = tmp_path / 'runs'
  if case == 'missing':
    expected = (f'repertory.results: error: {path} does not exist; pass run '
                'directories (the --logdir of python -m repertory.run) or '
                'folders holding them.')
  elif case == 'empty':
    os.makedirs(path)
    expected = ('repertory.results: error: No finished run directories under '
                f'{path}: pass the --logdir of python -m repertory.run runs, '
                'or folders holding them.')
  elif case == 'corrupt':
    _write_run(path / 'seed0')
    (path / 'seed0' / 'config.json').write_text('{"agent": ')
    expected = (f'repertory.results: error: {path / "seed0" / "config.json"} '
                'is truncated or corrupt')
  elif case == 'out':
    _write_run(path / 'seed0')
    out = tmp_path / 'page' / 'results.txt'
    expected = (f'repertory.results: error: --out={out} must name a '
                'Markdown file (.md).')
  elif case == 'bsuite':  # A bsuite run without the episodes it scores.
    _write_run(path / 'seed0', env='bsuite:memory_len/0')
    expected = ('repertory.results: error: Cannot read '
                f'{path / "seed0" / "episodes.csv"}')
  else:
    _write_run(path / 'seed0')
    expected = (f'repertory.results: error: --documented={tmp_path}/no.md: '
                'cannot read it (No such file or directory).')
  process = _generate([path], out, *(
      [f'--documented={tmp_path}/no.md'] if case == 'documented' else []))
  assert process.returncode == 1
  assert process.stdout == ''
  (line,) = process.stderr.strip().split('\n')
  assert line.startswith(expected), line
  assert not (tmp_path / 'page').exists()


def test_a_real_run_gives_its_command_and_machine(tmp_path):
  logdir = tmp_path / 'runs' / 'impala-catch' / 'seed3'
  command = ['--agent=impala', '--env=catch', '--lp_launch_type=local_mt',
             '--num_actors=1', '--envs_per_actor=4', '--max_actor_steps=2000',
             '--eval_every_steps=1000', '--eval_episodes=2', '--seed=3',
             f'--logdir={logdir}']
  subprocess.run([sys.executable, '-m', 'repertory.run', *command],
                 cwd=REPO, check=True, timeout=600, capture_output=True)
  out = tmp_path / 'results.md'
  results.write([str(tmp_path / 'runs')], str(out), 'the command')
  text = out.read_text()
  with open(logdir / 'results.json') as f:
    final = json.load(f)
  (row,) = _table_rows(text)
  assert row[3] == f'{final["eval_return_mean"]:.2f} (1 seed)'
  assert row[6] == f'{final["actor_steps"]:,}'
  assert 'python -m repertory.run ' + ' '.join(command) + '\n' in text
  seed_row = next(l for l in text.split('\n') if l.startswith('| 3 |'))
  machine = seed_row.split('|')[-2].strip()
  assert machine.startswith(f'{os.cpu_count()}, ')
  processor = rundir.processor()  # None where /proc/cpuinfo names none.
  assert machine.endswith(f'; {processor}') if processor else ';' not in (
      machine)


def _generate_kept(paths, archive, out):
  return subprocess.run(
      [sys.executable, '-m', 'repertory.results', *map(str, paths),
       f'--archive={archive}', f'--out={out}'], capture_output=True,
      text=True, cwd=REPO, timeout=300, check=False)


def test_the_archive_alone_rebuilds_the_page(tmp_path):
  _write_seeds(tmp_path / 'runs' / 'impala-catch')
  os.makedirs(tmp_path / 'runs' / 'impala-catch' / 'seed0' / 'checkpoints')
  (tmp_path / 'runs' / 'impala-catch' / 'seed0' / 'episodes.csv').write_text(
      'episode,return\n')  # Not read for catch: not kept.
  archive = tmp_path / 'docs' / 'results' / 'runs'
  out = tmp_path / 'docs' / 'results.md'
  kept = _generate_kept([tmp_path / 'runs'], archive, out)
  assert kept.returncode == 0, kept.stderr
  assert f'kept {tmp_path / "runs" / "impala-catch" / "seed1"} as ' in (
      kept.stdout)
  first = out.read_text()
  assert f'python -m repertory.results {archive} --out={out}' in first
  copy = archive / 'impala-catch' / 'seed0'
  assert sorted(os.listdir(copy)) == ['attempts', 'config.json',
                                      'progress.csv', 'results.json']
  assert sorted(os.listdir(copy / 'attempts' / '1')) == [
      'attempt.json', 'config.json', 'results.json']
  # The runs are gone; the archive gives the same page.
  subprocess.run(['rm', '-r', str(tmp_path / 'runs')], check=True)
  again = _generate([archive], out)
  assert again.returncode == 0, again.stderr
  assert out.read_text() == first
  (row,) = _table_rows(first)
  assert row[3] == _cell(EVAL)


def test_keeping_again_updates_a_run_and_refuses_another(tmp_path):
  archive = tmp_path / 'kept'
  out = tmp_path / 'results.md'
  run = _write_run(tmp_path / 'runs' / 'seed0', eval_return=0.5)
  assert _generate_kept([run], archive, out).returncode == 0
  assert (archive / 'seed0' / 'results.json').exists()
  # The same run resumed with a larger budget: its copy follows it.
  saved = rundir.read_json(os.path.join(run, 'config.json'))
  attempt = rundir.start_attempt(run, saved, ['repertory/run.py'])
  with open(os.path.join(run, 'results.json'), 'w') as f:
    json.dump({'eval_return_mean': 0.75, 'actor_steps': 80_000}, f)
  assert attempt.end() is not None
  kept = _generate_kept([run], archive, out)
  assert kept.returncode == 0, kept.stderr
  assert sorted(os.listdir(archive / 'seed0' / 'attempts')) == ['1', '2']
  assert json.loads((archive / 'seed0' / 'results.json').read_text())[
      'eval_return_mean'] == 0.75
  # Another run of the same name is refused, and the copy is untouched.
  before = (archive / 'seed0' / 'attempts' / '1' / 'attempt.json').read_text()
  other = tmp_path / 'elsewhere' / 'seed0'
  time.sleep(1.1)  # Another start time.
  _write_run(other)
  refused = _generate_kept([other], archive, out)
  assert refused.returncode == 1
  (line,) = refused.stderr.strip().split('\n')
  assert line == (f'repertory.results: error: {archive / "seed0"} holds '
                  f'another run than {other} (its first attempt started at '
                  'another time); remove it or rename the run directory.')
  assert (archive / 'seed0' / 'attempts' / '1' / 'attempt.json').read_text(
      ) == before


def test_a_bsuite_run_keeps_the_episodes_its_score_reads(tmp_path):
  run = _write_run(tmp_path / 'runs' / 'memory_len-0',
                   env='bsuite:memory_len/0')
  with open(os.path.join(run, 'episodes.csv'), 'w') as f:
    f.write('episode,return\n')
  kept = archive_lib.keep([str(tmp_path / 'runs')], str(tmp_path / 'kept'))
  assert kept == [(run, str(tmp_path / 'kept' / 'memory_len-0'))]
  assert (tmp_path / 'kept' / 'memory_len-0' / 'episodes.csv').exists()


def test_a_sweep_s_command_lines_are_kept_and_merged(tmp_path):
  """The page reads a bsuite sweep's command lines from `sweep.json` above
  its runs: the archive keeps them, adding a later sweep's to the copy's."""
  sweep = tmp_path / 'runs' / 'bsuite' / 'apex'
  first = 'python -m repertory.run --bsuite_sweep=memory_len/0'
  later = 'python -m repertory.run --bsuite_sweep=memory_len'
  _write_run(sweep / 'memory_len-0' / 'seed0', env='bsuite:memory_len/0')
  rundir.write_json(str(sweep / 'sweep.json'), {'commands': [first]})
  kept = tmp_path / 'kept' / 'bsuite' / 'apex'
  archive_lib.keep([str(tmp_path / 'runs' / 'bsuite' / 'apex')], str(kept))
  assert rundir.read_json(str(kept / 'sweep.json')) == {'commands': [first]}
  _write_run(sweep / 'memory_len-1' / 'seed0', env='bsuite:memory_len/1')
  rundir.write_json(str(sweep / 'sweep.json'), {'commands': [later]})
  archive_lib.keep([str(sweep)], str(kept))
  assert rundir.read_json(str(kept / 'sweep.json')) == {
      'commands': [first, later]}
  # A run kept under its own name has no sweep folder in the archive.
  alone = tmp_path / 'alone'
  archive_lib.keep([str(sweep / 'memory_len-0' / 'seed0')], str(alone))
  assert not (tmp_path / 'sweep.json').exists()
  assert os.listdir(alone) == ['seed0']


def test_kept_records_name_paths_relative_to_the_working_directory(
    tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  run = _write_run(tmp_path / 'runs' / 'seed0')
  config = rundir.read_json(os.path.join(run, 'config.json'))
  config['experiment']['logdir'] = str(tmp_path / 'runs' / 'seed0')
  config['experiment']['elsewhere'] = '/elsewhere/runs/seed0'
  rundir.write_json(os.path.join(run, 'config.json'), config)
  archive_lib.keep(['runs'], 'kept')
  kept = rundir.read_json(str(tmp_path / 'kept' / 'seed0' / 'config.json'))
  assert kept['experiment']['logdir'] == os.path.join('runs', 'seed0')
  assert kept['experiment']['elsewhere'] == '/elsewhere/runs/seed0'
  assert kept['agent'] == config['agent']
  (number,) = rundir.attempts(run)
  attempt = tmp_path / 'kept' / 'seed0' / 'attempts' / str(number)
  assert rundir.read_json(str(attempt / 'config.json'))['experiment'][
      'logdir'] == os.path.join('runs', 'seed0')
  # The program's path is outside the working directory here: kept as is.
  assert rundir.read_json(str(attempt / 'attempt.json'))['argv'][0] == (
      os.path.join(REPO, 'repertory', 'run.py'))


def test_the_committed_page_is_what_its_kept_records_give(tmp_path):
  """docs/results.md is regenerated from docs/results/runs alone, as its
  header says."""
  committed = os.path.join(REPO, 'docs', 'results.md')
  with open(committed) as f:
    text = f.read()
  header = shlex.split(text.split('```sh\n')[1].split('\n')[0])
  assert header[:4] == ['python', '-m', 'repertory.results',
                        os.path.join('docs', 'results', 'runs')]
  out = tmp_path / 'results.md'
  flags = [f for f in header[4:] if not f.startswith('--out=')]
  again = subprocess.run(
      [sys.executable, '-m', 'repertory.results',
       os.path.join('docs', 'results', 'runs'), f'--out={out}', *flags],
      capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
  assert again.returncode == 0, again.stderr
  expected = text.replace(f'--out={os.path.join("docs", "results.md")}',
                          f'--out={out}')
  for flag in flags:  # Links to documented pages, from tmp_path instead.
    for doc in flag.partition('--documented=')[2].split(','):
      if doc:
        expected = expected.replace(
            f']({os.path.relpath(doc, "docs")})',
            f']({os.path.relpath(os.path.join(REPO, doc), tmp_path)})')
  assert out.read_text() == expected


DOCS = """\
Some text, then the command (`python -m repertory.run --agent=ppo` inline
is not one):

```sh
TF_NUM_INTRAOP_THREADS=1 \\
python -m repertory.run --agent=impala --env=minatar:breakout \\
    --seed=0 --config.learning_rate=2e-3 --logdir=runs/x  # a comment
python -m repertory.results runs/ --out=docs/results.md
```
"""


def test_rows_that_ran_a_documented_command_name_its_page(tmp_path):
  docs = tmp_path / 'docs'
  os.makedirs(docs)
  (docs / 'guide.md').write_text(DOCS)
  (docs / 'other.md').write_text('```\npython -m repertory.run '
                                 '--agent=impala --env=catch\n```\n')
  runs = tmp_path / 'runs'
  # The documented command on another game, its number written otherwise
  # and a flag given twice (absl reads the last): documented.
  for seed in (0, 1):
    _write_run(runs / f'ok{seed}', env='minatar:asterix', seed=seed,
               flags=['--config.learning_rate=0.001',
                      '--config.learning_rate=0.002'])
  # Another value, another family, an extra flag: not documented.
  _write_run(runs / 'lr', env='minatar:asterix', learning_rate=5e-4,
             flags=['--config.learning_rate=5e-4'])
  _write_run(runs / 'gym', env='gym:CartPole-v1',
             flags=['--config.learning_rate=2e-3'])
  _write_run(runs / 'extra', env='minatar:seaquest', learning_rate=2e-3,
             flags=['--config.learning_rate=2e-3', '--num_actors=4'])
  # One seed of a row that did not: the row is not documented.
  _write_run(runs / 'mixed0', env='minatar:freeway', seed=0,
             flags=['--config.learning_rate=2e-3'])
  _write_run(runs / 'mixed1', env='minatar:freeway', seed=1)
  _write_run(runs / 'catch', flags=['--seed=3'])
  out = docs / 'results.md'
  process = _generate([runs], out, f'--documented={docs / "guide.md"},'
                      f'{docs / "other.md"}')
  assert process.returncode == 0, process.stderr
  text = out.read_text()
  header = text.split('\n')[text.split('\n').index('```sh') + 1]
  assert f'--documented={docs / "guide.md"},{docs / "other.md"}' in header
  rows = {(r[0], r[1].split('](')[0].strip('[')): r[-1]
          for r in _table_rows(text)}
  guide = f'[{docs / "guide.md"}](guide.md)'
  assert rows == {
      ('`catch`', 'impala'): f'[{docs / "other.md"}](other.md)',
      ('`gym:CartPole-v1`', 'impala'): '—',
      ('`minatar:asterix`', 'impala (config.learning_rate=0.0005)'): '—',
      ('`minatar:asterix`', 'impala (config.learning_rate=0.001)'): guide,
      ('`minatar:freeway`', 'impala'): '—',
      ('`minatar:seaquest`', 'impala'): '—'}
  assert f'These runs ran the command documented in {guide}.' in text


def test_a_sweep_s_trials_are_matched_by_the_sweep_s_command(tmp_path):
  doc = tmp_path / 'guide.md'
  doc.write_text('```sh\npython -m repertory.run --agent=impala \\\n'
                 '    --grid=config.learning_rate=1e-3,2e-3 --logdir=b\n```\n')
  root = tmp_path / 'runs' / 'sweep'
  _write_run(root / 'config.learning_rate=0.001' / 'seed0',
             flags=['--config.learning_rate=1e-3'])
  (root / 'sweep.json').write_text(json.dumps({'commands': [
      'python -m repertory.run --agent=impala '
      f'--grid=config.learning_rate=1e-3,2e-3 --logdir={root}']}))
  out = tmp_path / 'results.md'
  process = _generate([tmp_path / 'runs'], out, f'--documented={doc}')
  assert process.returncode == 0, process.stderr
  assert _table_rows(out.read_text())[0][-1] == f'[{doc}](guide.md)'
