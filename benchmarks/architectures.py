r"""Architectures compared: every available agent on one task, same actors,
same wall-clock budget.

Each agent (IMPALA, SEED, R2D2, Ape-X, PPO, A3C: whichever this version of
repertory has) runs its default `Config` on `gym:CartPole-v1` in `local_mp`
with the same number of actors and environments per actor, for the same
wall-clock budget, counted from its first actor step (so process start-up and
imports are not charged to anyone). A recorder node added to each program
samples the run monitor's summary every second; at the budget it has the
monitor evaluate the final weights and stops the program.
Each agent runs in its own subprocess (its own Ray instance).

Writes a markdown table (steps/s, wall-clock to a training return >= 475,
final returns, mean policy lag), a JSON file with the curves, and one PNG
plot of the training return against wall-clock time, one line per agent.

  python benchmarks/architectures.py                       # ~15 min
  python benchmarks/architectures.py --agents=ppo,a3c --budget_s=60
"""

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from absl import app
from absl import flags

_AGENTS = flags.DEFINE_list(
    'agents', ['impala', 'seed', 'r2d2', 'apex', 'ppo', 'a3c'],
    'Agents to compare (those not available are skipped).')
_ENV = flags.DEFINE_string('env', 'gym:CartPole-v1', 'Environment spec.')
_NUM_ACTORS = flags.DEFINE_integer('num_actors', 2, 'Actors of every agent.')
_ENVS_PER_ACTOR = flags.DEFINE_integer('envs_per_actor', 8,
                                       'Environments per actor.')
_BUDGET_S = flags.DEFINE_float('budget_s', 100.0,
                               'Wall-clock budget of every agent (seconds).')
_TARGET = flags.DEFINE_float('target_return', 475.0,
                             'The return whose wall-clock time is reported.')
_EVAL_EPISODES = flags.DEFINE_integer('eval_episodes', 10,
                                      'Final evaluation episodes.')
_OUT = flags.DEFINE_string('out', 'benchmarks/figures/architectures',
                           'Output prefix: <out>.png, <out>.md, <out>.json.')
_RUNDIR = flags.DEFINE_string('rundir', '/tmp/repertory_architectures',
                              'Where the runs write their logs.')
_ONLY = flags.DEFINE_string('only', None,
                            'Internal: run this one agent and write its JSON.')

SAMPLE_EVERY_S = 1.0


def record(monitor: Any, budget_s: float, path: str,
           startup_timeout_s: float = 900.0) -> None:
  """A node: samples `monitor.summary()` for `budget_s` from the first actor
  step on, then has the monitor evaluate and write results, and stops.

  Writes {'curve': [summary, ...], 'results': final results} to `path`;
  each summary has `bench_seconds`, the time since the first actor step.
  """
  from repertory import launch  # pylint: disable=g-import-not-at-top
  curve: List[Dict[str, Any]] = []
  stop = launch.stop_event()
  created = time.monotonic()
  start = None
  while not stop.is_set():
    summary = dict(monitor.summary())
    now = time.monotonic()
    if start is None and summary['actor_steps'] > 0:
      start = now
    if start is not None:
      summary['bench_seconds'] = now - start
      curve.append(summary)
      if now - start >= budget_s:
        break
    elif now - created > startup_timeout_s:
      break  # Never started: record what there is.
    stop.wait(SAMPLE_EVERY_S)
  results = monitor.finish() if not stop.is_set() else None
  with open(path, 'w') as f:
    json.dump({'curve': curve, 'results': results}, f, default=float)
  launch.stop()


def run_one(name: str) -> None:
  """Runs agent `name` for the budget in this process (local_mp)."""
  import functools  # pylint: disable=g-import-not-at-top,unused-import
  from repertory import agents  # pylint: disable=g-import-not-at-top
  from repertory import experiment as experiment_lib  # pylint: disable=g-import-not-at-top
  from repertory import launch  # pylint: disable=g-import-not-at-top
  agent = agents.get(name)
  logdir = os.path.join(_RUNDIR.value, name)
  os.makedirs(logdir, exist_ok=True)
  experiment = experiment_lib.ExperimentConfig(
      agent=name, env=_ENV.value, num_actors=_NUM_ACTORS.value,
      envs_per_actor=_ENVS_PER_ACTOR.value, max_actor_steps=10**12,
      stop_at_return=None, eval_episodes=_EVAL_EPISODES.value, seed=0,
      logdir=logdir, launch_type='local_mp', progress_every_seconds=10.0)
  program = agent.make_program(agent.Config(), experiment)
  monitor = program.groups['monitor'][0].create_handle()
  with program.group('benchmark'):
    program.add_node(launch.PyNode(record, monitor, _BUDGET_S.value,
                                   os.path.join(logdir, 'benchmark.json')))
  launch.launch(program, launch_type='local_mp',
                logdir=os.path.join(logdir, 'nodes'))


def first_time_at(curve: List[Dict[str, Any]], target: float
                  ) -> Optional[float]:
  """Wall-clock seconds when the training return first reached `target`."""
  for point in curve:
    value = point.get('episode_return_mean')
    if value is not None and value == value and value >= target:
      return float(point['bench_seconds'])
  return None


def summarise(name: str, data: Dict[str, Any], target: float
              ) -> Dict[str, Any]:
  curve, results = data['curve'], data.get('results') or {}
  last = curve[-1] if curve else {}
  first = curve[0] if curve else {}
  seconds = last.get('bench_seconds', 0.0) - first.get('bench_seconds', 0.0)
  steps = last.get('actor_steps', 0) - first.get('actor_steps', 0)
  return {
      'agent': name,
      'steps_per_second': steps / seconds if seconds > 0 else None,
      'seconds_to_target': first_time_at(curve, target),
      'final_train_return': last.get('episode_return_mean'),
      'final_eval_return': results.get('eval_return_mean'),
      'policy_lag_mean': results.get('policy_lag_mean',
                                     last.get('policy_lag_mean')),
      'actor_steps': results.get('actor_steps', last.get('actor_steps')),
  }


def _fmt(value, spec: str) -> str:
  if value is None or value != value:
    return '—'
  return format(value, spec)


def table(rows: List[Dict[str, Any]], target: float, budget: float) -> str:
  lines = [
      f'| agent | actor steps/s | wall-clock to return ≥ {target:g} (s) | '
      'final train return (last 100) | final eval return | mean policy lag |'
      ' actor steps |',
      '|---|---:|---:|---:|---:|---:|---:|']
  for r in rows:
    if 'error' in r:
      lines.append(f'| {r["agent"]} | failed: {r["error"]} | | | | | |')
      continue
    lines.append(
        f'| {r["agent"]} | {_fmt(r["steps_per_second"], ",.0f")} | '
        f'{_fmt(r["seconds_to_target"], ".0f") if r["seconds_to_target"] is not None else f"not within {budget:g}"} | '
        f'{_fmt(r["final_train_return"], ".1f")} | '
        f'{_fmt(r["final_eval_return"], ".1f")} | '
        f'{_fmt(r["policy_lag_mean"], ".2f")} | '
        f'{_fmt(r["actor_steps"], ",d")} |')
  return '\n'.join(lines)


def plot(curves: Dict[str, List[Dict[str, Any]]], target: float,
         path: str, title: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(8, 5))
  for name, curve in curves.items():
    points = [(p['bench_seconds'], p['episode_return_mean']) for p in curve
              if p.get('episode_return_mean') is not None and
              p['episode_return_mean'] == p['episode_return_mean']]
    if points:
      xs, ys = zip(*points)
      ax.plot(xs, ys, label=name)
  ax.axhline(target, color='grey', linestyle='--', linewidth=1)
  ax.set_xlabel('wall-clock time since the first actor step (s)')
  ax.set_ylabel('training return (mean of last 100 episodes)')
  ax.set_title(title)
  if curves:
    ax.legend()
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=120)


def main(argv):
  del argv
  if _ONLY.value:
    run_one(_ONLY.value)
    return
  from repertory import agents  # pylint: disable=g-import-not-at-top
  available = []
  for name in _AGENTS.value:
    try:
      agents.get(name)
      available.append(name)
    except ValueError as e:
      print(f'skipping {name}: {e}', flush=True)
  rows, curves = [], {}
  for name in available:
    print(f'--- {name}: {_BUDGET_S.value:g}s on {_ENV.value}, '
          f'{_NUM_ACTORS.value} actors x {_ENVS_PER_ACTOR.value} envs',
          flush=True)
    path = os.path.join(_RUNDIR.value, name, 'benchmark.json')
    if os.path.exists(path):
      os.remove(path)
    start = time.time()
    args = [sys.executable, os.path.abspath(__file__), f'--only={name}'] + [
        a for a in sys.argv[1:] if not a.startswith('--only')]
    for attempt in range(2):  # Ray can fail to start on a loaded machine.
      proc = subprocess.run(args, capture_output=True, text=True,
                            timeout=_BUDGET_S.value + 1200)
      log = os.path.join(_RUNDIR.value, f'{name}-attempt{attempt + 1}.log')
      with open(log, 'w') as f:
        f.write(proc.stdout + proc.stderr)
      if os.path.exists(path):
        break
      print(f'{name}: attempt {attempt + 1} failed (exit {proc.returncode}); '
            f'see {log}', flush=True)
    if not os.path.exists(path):
      tail = (proc.stderr or proc.stdout)[-2000:]
      print(f'{name} failed (exit {proc.returncode}):\n{tail}', flush=True)
      rows.append({'agent': name, 'error': f'exit {proc.returncode}'})
      continue
    with open(path) as f:
      data = json.load(f)
    curves[name] = data['curve']
    rows.append(summarise(name, data, _TARGET.value))
    print(f'{name} done in {time.time() - start:.0f}s: {rows[-1]}',
          flush=True)
  text = table(rows, _TARGET.value, _BUDGET_S.value)
  print(text)
  os.makedirs(os.path.dirname(_OUT.value) or '.', exist_ok=True)
  with open(_OUT.value + '.md', 'w') as f:
    f.write(f'{_ENV.value}, local_mp, {_NUM_ACTORS.value} actors x '
            f'{_ENVS_PER_ACTOR.value} envs, {_BUDGET_S.value:g} s each\n\n')
    f.write(text + '\n')
  with open(_OUT.value + '.json', 'w') as f:
    json.dump({'rows': rows, 'curves': curves}, f, default=float)
  plot(curves, _TARGET.value, _OUT.value + '.png',
       f'{_ENV.value}, local_mp, {_NUM_ACTORS.value} actors x '
       f'{_ENVS_PER_ACTOR.value} envs, {_BUDGET_S.value:g} s each')
  print(f'wrote {_OUT.value}.png, .md, .json')


if __name__ == '__main__':
  app.run(main)
