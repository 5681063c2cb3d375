r"""Seeds and config grids: every trial a separate program with its own run
directory, and one results table across them.

  python -m repertory.run --agent=impala --env=gym:CartPole-v1 \
      --max_actor_steps=100000 --seeds=3 --logdir=runs/cartpole
  python -m repertory.run --seeds=2 --grid=config.learning_rate=1e-3,3e-3 \
      --grid=num_actors=2,4 --logdir=runs/lr-actors
  python -m repertory.run --agent=r2d2 --bsuite_sweep=memory_len \
      --logdir=runs/bsuite/r2d2      # every setting of bsuite's sweep

Each trial is `python -m repertory.run` (or the script that called
`run.run()`) with the sweep's flags plus `--seed=<seed + i>`, the grid point's
flags and `--logdir=<logdir>/<grid point>/seed<i>`; with
`--bsuite_sweep=<experiment>` the points are the settings of bsuite's sweep
(`--env=bsuite:<experiment>/<n>`, the steps of its episodes as the budget;
`repertory.results.bsuite`), named `<experiment>-<n>`. A rerun skips the
trials that finished and resumes the others; `<logdir>/sweep.json` keeps
the sweep's command lines. On one machine the
trials run one after another (each program uses every core); with
`--lp_launch_type=ray` they are Ray Tune trials on the cluster, run
`--sweep_concurrency` at a time, each program's output in `output.log` in
its run directory. The table (`<logdir>/sweep.csv`, printed at
the end) has a row per trial: its grid values, seed, run directory and the
figures of its results.json; below it a row per grid point gives the mean
over seeds with its 95% interval (`summary_text`).
`python -m repertory.plot <logdir>` draws the trials, seeds as a mean with
shading.

From Python: `run_sweep(base_args, program, seeds=3, grid={...}, logdir=...)`
returns the table as a pandas DataFrame.
"""

import itertools
import json
import math
import os
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from repertory.components import statistics

# Where a Tune trial's program output goes, in its run directory.
OUTPUT_FILE = 'output.log'
# The sweep's command lines (each rerun's), in its logdir.
SWEEP_FILE = 'sweep.json'


def sweep_file_of(run_dir: str) -> str:
  """The `SWEEP_FILE` of the sweep whose trial `run_dir` is
  (`<logdir>/<grid point>/seed<i>`): two folders up."""
  return os.path.join(os.path.dirname(os.path.dirname(run_dir)), SWEEP_FILE)


# Results columns the table keeps (besides the grid values and seed).
TABLE_COLUMNS = ('actor_steps', 'learner_steps', 'wall_seconds',
                 'actor_steps_per_second', 'episode_return_mean',
                 'eval_return_mean', 'eval_return_std', 'policy_lag_mean')
# Flags the sweep sets per trial; a sweep's own argument list may not.
SWEEP_FLAGS = ('seeds', 'grid', 'logdir', 'seed', 'sweep_concurrency',
               'bsuite_sweep', 'bsuite_episodes')


def parse_grid(specs: Sequence[str]) -> Dict[str, List[str]]:
  """`['config.learning_rate=1e-3,3e-3', 'num_actors=2,4']` ->
  {'config.learning_rate': ['1e-3', '3e-3'], 'num_actors': ['2', '4']}."""
  grid = {}
  for spec in specs:
    name, sep, values = spec.partition('=')
    name = name.strip().lstrip('-')
    if not sep or not name or not values:
      raise ValueError(f'--grid={spec!r}: write --grid=<flag>=<v1>,<v2>,... '
                       '(e.g. --grid=config.learning_rate=1e-3,3e-3).')
    if name in SWEEP_FLAGS:
      raise ValueError(f'--grid={spec!r}: {name} is set by the sweep itself '
                       '(use --seeds and --logdir).')
    grid[name] = [v.strip() for v in values.split(',')]
  return grid


def grid_points(grid: Mapping[str, Sequence[str]]
                ) -> List[Tuple[str, Dict[str, str]]]:
  """(label, flags) of every combination of the grid's values."""
  names = sorted(grid)
  points = []
  for values in itertools.product(*(grid[n] for n in names)):
    point = dict(zip(names, values))
    label = '_'.join(f'{n.replace("config.", "")}={v}'
                     for n, v in point.items()) or 'default'
    points.append((label, point))
  return points


def trials(grid: Mapping[str, Sequence[str]], seeds: int, base_seed: int,
           logdir: str,
           points: Optional[Sequence[Tuple[str, Mapping[str, str]]]] = None
           ) -> List[Dict[str, Any]]:
  """Every (grid point, seed): its flags, name and run directory. `points`
  ((label, flags) pairs) replace the grid's when given."""
  if seeds < 1:
    raise ValueError(f'--seeds={seeds} must be >= 1.')
  out = []
  for label, point in (grid_points(grid) if points is None else points):
    for i in range(seeds):
      seed = base_seed + i
      out.append({'point': dict(point), 'seed': seed, 'label': label,
                  'logdir': os.path.join(logdir, label, f'seed{seed}')})
  return out


def trial_command(program: Sequence[str], base_args: Sequence[str],
                  trial: Mapping[str, Any]) -> List[str]:
  """The command line of one trial: the program, the flags every trial gets
  (`base_args`, without the `SWEEP_FLAGS`), then the trial's (the last of
  a flag given twice wins)."""
  return [*program, *base_args,
          *(f'--{n}={v}' for n, v in trial['point'].items()),
          f'--seed={trial["seed"]}', f'--logdir={trial["logdir"]}']


def _finished_budget(budget: int, logdir: str) -> bool:
  """Whether the run in `logdir` finished with a budget of at least `budget`
  actor steps (rerunning it would only be refused)."""
  from repertory import rundir  # pylint: disable=g-import-not-at-top
  done = rundir.finished(logdir)
  return done is not None and budget <= done[1]


def _run_trial(command: Sequence[str], logdir: str, budget: int,
               output_file: Optional[str] = None) -> Dict[str, Any]:
  """Runs one trial's program to its end (unless its run directory holds
  a run that finished `budget` actor steps; an unfinished one resumes);
  returns its results.json.

  The program's output goes to this process's, or to the end of
  `output_file` (the command line, then its stdout and stderr) when given:
  a trial run again (resumed) adds to it."""
  os.makedirs(logdir, exist_ok=True)
  line = f'repertory.sweep: {" ".join(command)}'
  if _finished_budget(budget, logdir):
    print(f'repertory.sweep: {logdir} finished; not run again.', flush=True)
    returncode = 0
  elif output_file is None:
    print(line, flush=True)
    returncode = subprocess.call(list(command))
  else:
    with open(output_file, 'a') as out:
      out.write(line + '\n')
      out.flush()
      returncode = subprocess.call(list(command), stdout=out,
                                   stderr=subprocess.STDOUT)
  path = os.path.join(logdir, 'results.json')
  if not os.path.exists(path):
    seen = f' (its output: {output_file})' if output_file else ''
    return {'error': f'exit status {returncode}, no results.json{seen}'}
  with open(path) as f:
    return json.load(f)


def _tune_trainable(config: Dict[str, Any]) -> None:
  """One Tune trial: runs its program (a subprocess of the Tune worker) and
  reports its results.json.

  The program's output goes to `<run directory>/output.log`: Ray would
  forward it to the sweep's terminal late (after the table) and interleaved
  with the other trials'."""
  from ray import tune  # pylint: disable=g-import-not-at-top
  trial = config['trial']
  results = _run_trial(trial['command'], trial['logdir'], trial['budget'],
                       os.path.join(trial['logdir'], OUTPUT_FILE))
  tune.report({k: v for k, v in results.items()
               if isinstance(v, (int, float, str)) or v is None})


def _connect(address: Optional[str]) -> None:
  """Connects this process to the Ray cluster at `address` (else
  `RAY_ADDRESS`, else 'auto'), refusing one without token authentication
  as `launch` does."""
  import ray  # pylint: disable=g-import-not-at-top
  from repertory.launch.backends import ray_auth  # pylint: disable=g-import-not-at-top
  from repertory.launch.backends import local_ray  # pylint: disable=g-import-not-at-top
  if not ray.is_initialized():
    local_ray.connect(address)
  ray_auth.check_token_auth('ray')


def _run_with_tune(commands: Sequence[List[str]], runs: Sequence[dict],
                   logdir: str, concurrency: int,
                   ray_address: Optional[str] = None
                   ) -> List[Dict[str, Any]]:
  """The trials as Ray Tune trials on the cluster at `ray_address`."""
  from ray import tune  # pylint: disable=g-import-not-at-top
  _connect(ray_address)
  space = {'trial': tune.grid_search([
      {'command': c, 'logdir': r['logdir'], 'budget': r['budget']}
      for c, r in zip(commands, runs)])}
  tuner = tune.Tuner(
      _tune_trainable,
      param_space=space,
      tune_config=tune.TuneConfig(max_concurrent_trials=concurrency),
      run_config=tune.RunConfig(name='tune', verbose=1,
                                storage_path=os.path.abspath(logdir)))
  grid = tuner.fit()
  by_logdir = {}
  for result in grid:
    by_logdir[result.config['trial']['logdir']] = dict(result.metrics or {})
  return [by_logdir.get(r['logdir'], {'error': 'no result'}) for r in runs]


def run_sweep(base_args: Sequence[str], program: Sequence[str],
              seeds: int = 1,
              grid: Optional[Mapping[str, Sequence[str]]] = None,
              logdir: str = 'runs/sweep', base_seed: int = 0,
              use_tune: bool = False, concurrency: int = 1,
              ray_address: Optional[str] = None,
              points: Optional[Sequence[Tuple[str, Mapping[str, str]]]] = None,
              command: Optional[str] = None,
              max_actor_steps: Optional[int] = None) -> Any:
  """Runs every (grid point, seed) as its own program; returns the table
  (a pandas DataFrame, also written to `<logdir>/sweep.csv`).

  Run again, it skips the trials whose run finished (with a budget at least
  this one's) and resumes the others.

  Args:
    base_args: flags every trial gets (e.g. ['--agent=impala',
      '--env=gym:CartPole-v1', '--max_actor_steps=100000']).
    seeds: trials per grid point, seeds `base_seed`, `base_seed + 1`, ...
    grid: flag name -> values (e.g. {'config.learning_rate': ['1e-3',
      '3e-3']}); every combination is a grid point.
    logdir: the sweep's directory; trial run directories go below it.
    program: the command that runs one trial: `[sys.executable, '-m',
      'repertory.run']`, or a script built on `run.run()`.
    use_tune: run the trials as Ray Tune trials on the Ray cluster at
      `ray_address` (default: `RAY_ADDRESS`, else 'auto'), `concurrency` at
      a time; Tune's own records go to `<logdir>/tune`.
    points: (label, flags) pairs, the trials' settings instead of the grid's
      (e.g. `results.bsuite.sweep_points`: a bsuite experiment's settings).
    command: the sweep's command line, added to the `commands` of
      `<logdir>/sweep.json`.
    max_actor_steps: the trials' budget (default: `ExperimentConfig`'s),
      unless their grid point sets `max_actor_steps`.
  """
  import pandas as pd  # pylint: disable=g-import-not-at-top
  for arg in base_args:
    if arg.lstrip('-').split('=', 1)[0] in SWEEP_FLAGS:
      raise ValueError(f'run_sweep: {arg!r} in base_args: the sweep sets '
                       f'{", ".join(SWEEP_FLAGS)} itself.')
  logdir = os.path.abspath(logdir)
  runs = trials(dict(grid or {}), seeds, base_seed, logdir, points)
  if max_actor_steps is None:
    from repertory import experiment  # pylint: disable=g-import-not-at-top
    max_actor_steps = experiment.ExperimentConfig.max_actor_steps
  for run in runs:
    run['budget'] = int(run['point'].get('max_actor_steps', max_actor_steps))
  program = list(program)
  commands = [trial_command(program, base_args, r) for r in runs]
  os.makedirs(logdir, exist_ok=True)
  if command:
    _record_command(logdir, command)
  if use_tune:
    results = _run_with_tune(commands, runs, logdir, concurrency, ray_address)
  else:
    results = [_run_trial(c, r['logdir'], r['budget'])
               for c, r in zip(commands, runs)]
  rows = []
  for run, result in zip(runs, results):
    row = {'label': run['label'], **run['point'], 'seed': run['seed']}
    row.update({k: result.get(k) for k in TABLE_COLUMNS})
    if 'error' in result:
      row['error'] = result['error']
    row['logdir'] = run['logdir']
    rows.append(row)
  table = pd.DataFrame(rows)
  table.to_csv(os.path.join(logdir, 'sweep.csv'), index=False)
  return table


def _record_command(logdir: str, command: str) -> None:
  """Adds `command` to the `commands` of `<logdir>/sweep.json`."""
  path = os.path.join(logdir, SWEEP_FILE)
  commands = []
  if os.path.exists(path):
    with open(path) as f:
      commands = json.load(f).get('commands', [])
  if command not in commands:
    with open(path + '.tmp', 'w') as f:
      json.dump({'commands': commands + [command]}, f, indent=2)
    os.replace(path + '.tmp', path)


def summarize(table: Any) -> Any:
  """Mean and standard deviation over seeds of each grid point."""
  numeric = [c for c in TABLE_COLUMNS if c in table]
  return table.groupby('label')[numeric].agg(['mean', 'std'])


def interval(values: Sequence[Optional[float]]) -> Tuple[float, float, int]:
  """(mean, half width of its 95% interval, n) of seeds' figures, leaving
  out missing (None, nan) ones (Student's t; the half width is nan for one
  seed)."""
  values = [float(v) for v in values
            if v is not None and not math.isnan(float(v))]
  mean, low, high = statistics.mean_interval(values)
  return mean, (high - low) / 2, len(values)


SUMMARY_COLUMNS = ('eval_return_mean', 'episode_return_mean')


def summary_text(table: Any) -> str:
  """A row per grid point: the mean over seeds of each of
  `SUMMARY_COLUMNS` with its 95% interval (mean ± half width, n seeds)."""
  lines = []
  for label, rows in table.groupby('label', sort=False):
    parts = []
    for column in SUMMARY_COLUMNS:
      if column not in rows:
        continue
      mean, half, n = interval(rows[column].tolist())
      if n:
        parts.append(f'{column} {mean:.4g} ± {half:.3g} (95%, n={n})'
                     if n > 1 else f'{column} {mean:.4g} (n=1, no interval)')
    lines.append(f'mean over seeds  {label}: ' + ('; '.join(parts) or
                                                 'no results'))
  return '\n'.join(lines)
