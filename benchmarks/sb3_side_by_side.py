r"""Stable-Baselines3 PPO and repertory PPO/IMPALA/SEED side by side on CartPole.

  python benchmarks/sb3_side_by_side.py \
      --runs=sb3,ppo,impala,seed --seeds=0,1,2 --out=/tmp/side_by_side.jsonl
  python benchmarks/sb3_side_by_side.py --table_from=/tmp/side_by_side.jsonl

Each run is one command started as a child process, exactly as a user would
type it (`python -m repertory.run ...` in local_mp, or SB3 PPO with the RL
Baselines3 Zoo's CartPole-v1 settings in one process, 8 environments). Time
zero is the moment the command is started. While it runs, every `--every`
seconds the script sums the PSS of the whole process tree (psutil
`memory_full_info().pss`; Ray's GCS, raylet and every node process are in
it) and watches two files of the run:

- the first training step: repertory's learner writes its first
  `learner.csv` row after its first update (every agent's `LearnerHost`
  logs its first update), looked for every `_FIRST_STEP_POLL_S` until it
  is there; the SB3 child writes `first_step` (its own clock reading) when
  its second rollout starts (after its first `train()`);
- `episodes.csv` (wall time, return, length of every finished training
  episode; repertory's `RunMonitor` writes it, the SB3 child a callback).

Figures per run: time from the command to the first 20-episode mean return
>= 475 (`--solved`), start-up (command -> first training step), env steps/s
(finished-episode steps at the solve / time from the first training step to
the solve), steps at the solve (sum of the lengths of the episodes finished
by then; the same definition for every runner), the peak PSS of the tree,
and whether the 20-episode mean fell below `--collapse` in the
`--after_solve_s` seconds watched after the solve. Then the run is ended
(SIGTERM, as Ctrl-C would). `cat /proc/loadavg` is recorded at each run's
start and end; a run that starts at a 1-minute load above the machine's
core count is marked.

SB3 is a benchmark-only dependency (`pip install 'repertory[bench]'`);
repertory never imports it.
"""

import collections
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from absl import app
from absl import flags
import numpy as np
import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import child_process
# pylint: enable=g-import-not-at-top,wrong-import-position

_RUNS = flags.DEFINE_list('runs', ['sb3', 'ppo', 'impala', 'seed'],
                          'Runners, in order: sb3, ppo, impala, seed, '
                          'ppo_sb3 (repertory PPO with every SB3 rl-zoo '
                          'setting spelled out, SB3\'s round shape), '
                          'impala_appo / seed_appo (docs/impala.md\'s '
                          'flags that stay solved, a 150k budget), or '
                          'ppo_mt / impala_mt (as ppo / impala, in one '
                          'process: --lp_launch_type=local_mt).')
_SEEDS = flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds, each runner.')
_OUT = flags.DEFINE_string('out', '/tmp/sb3_side_by_side.jsonl',
                           'One JSON line per run is appended here.')
_TABLE_FROM = flags.DEFINE_string('table_from', '', 'Only print the table '
                                  'of the runs in this JSON-lines file.')
_SOLVED = flags.DEFINE_float('solved', 475.0, 'Solve threshold.')
_WINDOW = flags.DEFINE_integer('window', 20, 'Episodes in the mean.')
_COLLAPSE = flags.DEFINE_float('collapse', 400.0, 'Collapse threshold.')
_AFTER_SOLVE_S = flags.DEFINE_float('after_solve_s', 10.0,
                                    'Seconds watched after the solve.')
_TIMEOUT_S = flags.DEFINE_float('timeout_s', 120.0, 'Per-run limit.')
_EVERY = flags.DEFINE_float('every', 0.5, 'Sampling period, seconds.')
# How often the first training step is looked for until it is seen.
_FIRST_STEP_POLL_S = 0.05
_OWN_STOP = flags.DEFINE_bool(
    'own_stop', False, 'Let each repertory run stop itself by its default '
    'stop rule (--stop_at_return=auto, judged by its periodic evaluations) '
    'and record when the command exited, instead of ending it '
    '--after_solve_s after the solve.')
_KEEP = flags.DEFINE_bool('keep_logdirs', False, 'Keep each run\'s logdir.')
_CURVES = flags.DEFINE_string('curves_dir', '', 'If set, copy each run\'s '
                              'episodes.csv there as <runner>_<seed>.csv.')
_PLOT_FROM = flags.DEFINE_string('plot_from', '', 'Only draw the curves '
                                 'saved in this --curves_dir to --figure.')
_FIGURE = flags.DEFINE_string('figure', 'benchmarks/figures/'
                              'cartpole_sb3_side_by_side.png', 'PNG path.')
_PLOT_RUNS = flags.DEFINE_list('plot_runs', ['sb3', 'ppo_sb3', 'ppo'],
                               'Runners drawn by --plot_from.')
_EXTRA = flags.DEFINE_multi_string('extra_flag', [], 'A flag appended to '
                                   'every repertory runner\'s command (e.g. '
                                   '--extra_flag=--config.batch_size=16); '
                                   'repeat for several.')
# Internal: the SB3 child process.
_SB3_CHILD = flags.DEFINE_string('sb3_child', '', 'Internal: run SB3 PPO '
                                 'with this logdir.')
_SEED = flags.DEFINE_integer('seed', 0, 'Internal: the SB3 child\'s seed.')
_SB3_STEPS = flags.DEFINE_integer('sb3_timesteps', 100_000, 'SB3\'s budget '
                                  '(rl-zoo: 1e5; its schedules anneal over '
                                  'it).')

_CARTPOLE = ['--env=gym:CartPole-v1', '--stop_at_return=never',
             '--eval_episodes=1']
# README's CartPole flags for IMPALA (SEED takes the same).
_IMPALA_FLAGS = ['--config.shared_torso=false', '--config.activation=tanh',
                 '--config.learning_rate=5e-4', '--config.unroll_length=20',
                 '--config.batch_size=4', '--config.discount=0.98',
                 '--config.vtrace_lambda=0.95']
# docs/impala.md's second CartPole command (IMPALA and SEED): APPO's clip
# over 12 passes per batch of 12 unrolls (240 transitions, about SB3's
# 256), advantages normalised per batch, a short queue, discount 0.99, and
# the learning rate and the clip annealed to 0 over the run's budget
# (`_BUDGET`), as SB3's PPO over its 100k.
_APPO_FLAGS = [f for f in _IMPALA_FLAGS if not f.startswith(
    ('--config.learning_rate=', '--config.batch_size=',
     '--config.discount='))] + [
    '--config.batch_size=12', '--config.discount=0.99',
    '--config.learning_rate=1e-3', '--config.passes_per_batch=12',
    '--config.ppo_clip=0.2', '--config.anneal_ppo_clip=true',
    '--config.normalize_advantages=true', '--config.entropy_cost=0',
    '--config.max_queue_size=16', '--config.learning_rate_anneal_steps=150000']
# Repertory PPO with SB3's rl-zoo run spelled out: its round (8 environments
# x 32 steps = 256, one minibatch, 20 epochs), SB3's MlpPolicy network
# (separate 64-64 tanh MLPs, orthogonal init), no value clipping, SB3's value
# weight (its vf_coef 0.5 multiplies the plain MSE; repertory's value_cost
# the half MSE), learning rate and clip range annealed to 0 over SB3's 100k
# steps with SB3's progress offset. PPO's defaults are these too, but for the
# round's shape; the flags keep this runner SB3's if the defaults change.
_PPO_SB3_FLAGS = ['--num_actors=2', '--envs_per_actor=4',
                  '--config.num_minibatches=1', '--config.num_epochs=20',
                  '--config.unroll_length=32', '--config.learning_rate=1e-3',
                  '--config.clip_epsilon=0.2', '--config.discount=0.98',
                  '--config.gae_lambda=0.8', '--config.entropy_cost=0.0',
                  '--config.max_grad_norm=0.5',
                  '--config.network=separate_tanh',
                  '--config.value_clip_epsilon=None', '--config.value_cost=1.0',
                  '--config.anneal_learning_rate=true',
                  '--config.anneal_clip_epsilon=true',
                  '--config.anneal_steps=100000']
# PPO's schedules anneal over the run's budget (max_actor_steps, as SB3's
# over total_timesteps): its runners get SB3's 100k; IMPALA and SEED run
# until the benchmark ends them.
_BUDGET = {'ppo': 100_000, 'ppo_sb3': 100_000, 'impala_appo': 150_000,
           'seed_appo': 150_000}
_RUNNERS = ('sb3', 'ppo', 'ppo_sb3', 'impala', 'seed', 'impala_appo',
            'seed_appo', 'ppo_mt', 'impala_mt')


def repertory_command(runner: str, seed: int, logdir: str) -> List[str]:
  """The user's command line of one repertory run."""
  in_threads = runner.endswith('_mt')
  runner = runner[:-len('_mt')] if in_threads else runner
  agent = {'ppo': 'ppo', 'ppo_sb3': 'ppo', 'impala': 'impala',
           'seed': 'seed', 'impala_appo': 'impala',
           'seed_appo': 'seed'}[runner]
  extra = {'ppo': [], 'ppo_sb3': _PPO_SB3_FLAGS, 'impala': _IMPALA_FLAGS,
           'seed': _IMPALA_FLAGS, 'impala_appo': _APPO_FLAGS,
           'seed_appo': _APPO_FLAGS}[runner]
  if in_threads:
    extra = extra + ['--lp_launch_type=local_mt']
  budget = _BUDGET.get(runner, 100_000_000)
  cartpole = ['--env=gym:CartPole-v1'] if _OWN_STOP.value else _CARTPOLE
  return ([sys.executable, '-m', 'repertory.run', f'--agent={agent}',
           f'--seed={seed}', f'--logdir={logdir}',
           f'--max_actor_steps={budget}'] + cartpole + extra +
          list(_EXTRA.value))


def runner_command(runner: str, seed: int, logdir: str,
                   sb3_timesteps: Optional[int] = None) -> List[str]:
  """The command line of one run: SB3's child, or repertory's command."""
  if runner == 'sb3':
    return [sys.executable, os.path.abspath(__file__),
            f'--sb3_child={logdir}', f'--seed={seed}',
            f'--sb3_timesteps={sb3_timesteps or _SB3_STEPS.value}']
  return repertory_command(runner, seed, logdir)


def sb3_child(logdir: str, seed: int) -> None:
  """SB3 PPO with rl-zoo's CartPole-v1 hyperparameters (hyperparams/ppo.yml)."""
  # SB3's logger imports tensorboard, which imports TensorFlow when it is
  # installed (it is here, for repertory): 8 CPU-seconds that a user's SB3
  # environment does not pay. Hide it, as in an SB3-only environment.
  sys.modules['tensorflow'] = None
  # pylint: disable=g-import-not-at-top
  from stable_baselines3 import PPO
  from stable_baselines3.common.callbacks import BaseCallback
  from stable_baselines3.common.env_util import make_vec_env
  import torch
  # pylint: enable=g-import-not-at-top
  # One intra-op thread: with torch's default (one per core) SB3 ran at
  # ~60 steps/s instead of thousands while other processes shared the two
  # cores (OpenMP threads spin); repertory's actors limit TF threads alike.
  torch.set_num_threads(1)
  os.makedirs(logdir, exist_ok=True)
  episodes = open(os.path.join(logdir, 'episodes.csv'), 'w')  # pylint: disable=consider-using-with
  episodes.write('time,return,length\n')
  # A row per rollout, as repertory's progress.csv (cpu_breakdown.py's
  # windows): steps taken, their rate, seconds since the start.
  progress = open(os.path.join(logdir, 'progress.csv'), 'w')  # pylint: disable=consider-using-with
  progress.write('actor_steps,actor_steps_per_second,wall_seconds\n')
  start = time.time()

  class Recorder(BaseCallback):

    def __init__(self):
      super().__init__()
      self.rollouts = 0

    def _on_rollout_start(self) -> None:
      self.rollouts += 1
      seconds = time.time() - start
      progress.write(f'{self.num_timesteps},'
                     f'{self.num_timesteps / max(seconds, 1e-9):.1f},'
                     f'{seconds:.3f}\n')
      progress.flush()
      if self.rollouts == 2:  # The first train() has just finished.
        with open(os.path.join(logdir, 'first_step'), 'w') as f:
          f.write(f'{time.time():.3f}\n')

    def _on_step(self) -> bool:
      now = time.time()
      for info in self.locals['infos']:
        if 'episode' in info:
          episodes.write(f'{now:.3f},{info["episode"]["r"]:g},'
                         f'{info["episode"]["l"]}\n')
      episodes.flush()
      return True

  linear = lambda start: (lambda progress: progress * start)
  env = make_vec_env('CartPole-v1', n_envs=8, seed=seed)
  model = PPO('MlpPolicy', env, n_steps=32, batch_size=256, gae_lambda=0.8,
              gamma=0.98, n_epochs=20, ent_coef=0.0,
              learning_rate=linear(1e-3), clip_range=linear(0.2), seed=seed,
              device='cpu', verbose=0)
  model.learn(total_timesteps=_SB3_STEPS.value, callback=Recorder())
  episodes.close()
  progress.close()


def _tree_pss(root: psutil.Process) -> int:
  total = 0
  try:
    processes = [root] + root.children(recursive=True)
  except psutil.Error:
    return 0
  for p in processes:
    try:
      total += p.memory_full_info().pss
    except psutil.Error:
      pass
  return total


def _read_episodes(path: str) -> List[Any]:
  if not os.path.exists(path):
    return []
  with open(path) as f:
    text = f.read()
  rows = []
  for line in text.splitlines()[1:]:
    parts = line.split(',')
    if len(parts) == 3:
      try:
        rows.append((float(parts[0]), float(parts[1]), int(parts[2])))
      except ValueError:
        pass  # A line still being written.
  rows.sort(key=lambda r: r[0])
  return rows


def analyse(rows, t0: float, first_step: Optional[float]) -> Dict[str, Any]:
  """Solve time, steps, collapse from episode rows (time, return, length)."""
  window = collections.deque(maxlen=_WINDOW.value)
  steps = 0
  solved_at = solved_steps = None
  min_after = None
  for t, r, n in rows:
    window.append(r)
    steps += n
    if len(window) < _WINDOW.value:
      continue
    mean = float(np.mean(window))
    if solved_at is None and mean >= _SOLVED.value:
      solved_at, solved_steps = t, steps
      min_after = mean
    elif solved_at is not None:
      min_after = min(min_after, mean)
  out = {'episodes': len(rows), 'episode_steps': steps,
         'startup_s': None if first_step is None else first_step - t0,
         'solve_s': None if solved_at is None else solved_at - t0,
         'solve_steps': solved_steps,
         'min_mean_after_solve': min_after,
         'collapsed': (None if min_after is None
                       else bool(min_after < _COLLAPSE.value))}
  if solved_at is not None and first_step is not None:
    out['steps_per_s'] = solved_steps / max(solved_at - first_step, 1e-9)
  elif rows and first_step is not None:
    out['steps_per_s'] = steps / max(rows[-1][0] - first_step, 1e-9)
  return out


def _first_step_time(runner: str, logdir: str) -> Optional[float]:
  if runner == 'sb3':
    path = os.path.join(logdir, 'first_step')
    if os.path.exists(path):
      with open(path) as f:
        text = f.read().strip()
      return float(text) if text else None
    return None
  paths = glob.glob(os.path.join(logdir, '**', 'learner.csv'), recursive=True)
  for path in paths:
    with open(path) as f:
      if sum(1 for _ in f) >= 2:  # Header + the first update's row.
        return time.time()
  return None


def run_one(runner: str, seed: int) -> Dict[str, Any]:
  """Runs one command, samples it, ends it; returns its figures."""
  logdir = tempfile.mkdtemp(prefix=f'side_by_side_{runner}_{seed}_')
  command = runner_command(runner, seed, logdir)
  load_before = open('/proc/loadavg').read().split()[:3]
  t0 = time.time()
  # Its own session (one killpg ends its tree); SIGTERM if this one dies.
  process = child_process.start(
      command, stdout=subprocess.DEVNULL,
      stderr=open(os.path.join(logdir, 'stderr'), 'w'))
  root = psutil.Process(process.pid)
  peak_pss = 0
  first_step = None
  first_solve = None
  episodes_path = os.path.join(logdir, 'episodes.csv')
  while process.poll() is None:
    now = time.time()
    peak_pss = max(peak_pss, _tree_pss(root))
    if first_step is None:
      first_step = _first_step_time(runner, logdir)
    if first_solve is None:
      first_solve = analyse(_read_episodes(episodes_path), t0,
                            first_step)['solve_s']
    if now - t0 > _TIMEOUT_S.value or (
        first_solve is not None and not _OWN_STOP.value and
        now - t0 > first_solve + _AFTER_SOLVE_S.value):
      break
    next_sample = now + _EVERY.value
    while (first_step is None and time.time() < next_sample and
           process.poll() is None):  # The start-up to the poll, not --every.
      time.sleep(_FIRST_STEP_POLL_S)
      first_step = _first_step_time(runner, logdir)
    time.sleep(max(0.0, next_sample - time.time()))
  ended = time.time()
  exited_by_itself = process.poll() is not None
  if process.poll() is None:
    process.send_signal(signal.SIGTERM)
    try:
      process.wait(timeout=60)
    except subprocess.TimeoutExpired:
      os.killpg(process.pid, signal.SIGKILL)
      process.wait()
  figures = analyse(_read_episodes(episodes_path), t0, first_step)
  figures.update({
      'runner': runner, 'seed': seed, 'command': ' '.join(command[1:]),
      'extra_flags': [] if runner == 'sb3' else list(_EXTRA.value),
      'returncode': process.returncode, 'watched_s': ended - t0,
      'total_s': time.time() - t0, 'peak_pss_gb': peak_pss / 2**30,
      'exit_s': ended - t0 if exited_by_itself else None,
      'loadavg_start': load_before,
      'loadavg_end': open('/proc/loadavg').read().split()[:3],
      'high_load': float(load_before[0]) > os.cpu_count(),
  })
  if _CURVES.value:
    os.makedirs(_CURVES.value, exist_ok=True)
    if os.path.exists(episodes_path):
      shutil.copy(episodes_path,
                  os.path.join(_CURVES.value, f'{runner}_{seed}.csv'))
  if not _KEEP.value:
    shutil.rmtree(logdir, ignore_errors=True)
  else:
    figures['logdir'] = logdir
  return figures


def _fmt(values, form, unit='', missing='not solved'):
  shown = [form.format(v) + unit if v is not None else missing
           for v in values]
  return ' / '.join(shown)


def print_table(results: List[Dict[str, Any]]) -> None:
  names = {'sb3': 'Stable-Baselines3 PPO, rl-zoo settings, 8 envs, 1 process',
           'ppo': 'repertory PPO (defaults), local_mp',
           'ppo_sb3': 'repertory PPO, SB3\'s rl-zoo settings and network '
                      '(2 x 4 envs, 1 minibatch), local_mp',
           'impala': 'repertory IMPALA (README\'s CartPole flags), local_mp',
           'seed': 'repertory SEED (IMPALA\'s flags), local_mp',
           'impala_appo': 'repertory IMPALA, docs/impala.md\'s second '
                          'CartPole command (150k budget), local_mp',
           'seed_appo': 'repertory SEED, docs/impala.md\'s second '
                        'CartPole command (150k budget), local_mp',
           'ppo_mt': 'repertory PPO (defaults), local_mt (one process)',
           'impala_mt': 'repertory IMPALA (README\'s CartPole flags), '
                        'local_mt (one process)'}
  print('| | time to 475 from launch (per seed) | start-up before the first '
        'training step | env steps/s | steps at 475 | peak PSS of the '
        'process tree | fell below 400 after 475 | the command exited '
        '(--own_stop) | loadavg at start |')
  print('|---|---|---|---|---|---|---|---|---|')
  # One row per runner and --extra_flag set, named with those flags.
  by_runner = collections.OrderedDict()
  for r in results:
    key = (r['runner'], tuple(r.get('extra_flags', ())))
    by_runner.setdefault(key, []).append(r)
  for (runner, extra_flags), rs in by_runner.items():
    rs.sort(key=lambda r: r['seed'])
    startups = [r['startup_s'] for r in rs if r['startup_s'] is not None]
    rates = [r.get('steps_per_s') for r in rs if r.get('steps_per_s')]
    collapses = [r['collapsed'] for r in rs if r['collapsed'] is not None]
    loads = [r['loadavg_start'][0] + ('*' if r['high_load'] else '')
             for r in rs]
    cells = [
        names.get(runner, runner) + (
            ', with ' + ' '.join(extra_flags) if extra_flags else ''),
        _fmt([r['solve_s'] for r in rs], '{:.1f}', ' s'),
        (f'{min(startups):.1f}-{max(startups):.1f} s' if startups else '-'),
        (f'{min(rates) / 1e3:.1f}-{max(rates) / 1e3:.1f}k' if rates else '-'),
        _fmt([r['solve_steps'] for r in rs], '{:,}'),
        # peak_pss_gb is in GiB (2**30 bytes); 1 GiB is 1.074 GB.
        f'{max(r["peak_pss_gb"] for r in rs):.2f} GiB',
        f'{sum(collapses)} of {len(collapses)} solved runs',
        (_fmt([r.get('exit_s') for r in rs], '{:.1f}', ' s',
              missing='killed')
         if any('exit_s' in r for r in rs) else '-'),
        ' / '.join(loads),
    ]
    print('| ' + ' | '.join(cells) + ' |')


def plot_curves(curves_dir: str, figure: str, runners: List[str]) -> None:
  """20-episode mean training return against env steps, every seed."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(8, 4.5))
  colors = dict(zip(runners, plt.rcParams['axes.prop_cycle'].by_key()['color']))
  for runner in runners:
    paths = sorted(glob.glob(os.path.join(curves_dir, f'{runner}_*.csv')))
    paths = [p for p in paths if os.path.basename(p)[len(runner) + 1:-4]
             .isdigit()]
    for i, path in enumerate(paths):
      rows = _read_episodes(path)
      returns = np.array([r for _, r, _ in rows])
      steps = np.cumsum([n for _, _, n in rows])
      if len(returns) < _WINDOW.value:
        continue
      kernel = np.ones(_WINDOW.value) / _WINDOW.value
      mean = np.convolve(returns, kernel, mode='valid')
      ax.plot(steps[_WINDOW.value - 1:], mean, color=colors[runner],
              alpha=0.8, lw=1, label=runner if i == 0 else None)
  ax.axhline(_SOLVED.value, color='gray', ls='--', lw=0.8)
  ax.set_xlabel('environment steps (finished episodes)')
  ax.set_ylabel(f'mean training return, last {_WINDOW.value} episodes')
  ax.set_title('CartPole-v1: SB3 PPO (rl-zoo) and repertory PPO, each seed')
  ax.legend()
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(figure)), exist_ok=True)
  fig.savefig(figure, dpi=100)
  print('wrote', figure)


def main(argv):
  del argv
  if _PLOT_FROM.value:
    plot_curves(_PLOT_FROM.value, _FIGURE.value, _PLOT_RUNS.value)
    return
  if _SB3_CHILD.value:
    sb3_child(_SB3_CHILD.value, _SEED.value)
    return
  if _TABLE_FROM.value:
    with open(_TABLE_FROM.value) as f:
      print_table([json.loads(line) for line in f if line.strip()])
    return
  for runner in _RUNS.value:
    if runner not in _RUNNERS:
      raise app.UsageError(f'--runs: unknown runner {runner!r}; choose from '
                           f'{", ".join(_RUNNERS)}.')
  results = []
  for seed in [int(s) for s in _SEEDS.value]:
    for runner in _RUNS.value:
      figures = run_one(runner, seed)
      print(json.dumps(figures), flush=True)
      with open(_OUT.value, 'a') as f:
        f.write(json.dumps(figures) + '\n')
      results.append(figures)
  print_table(results)


if __name__ == '__main__':
  app.run(main)
