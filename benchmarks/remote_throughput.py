r"""Remote environments: action throughput and latency through the gRPC
service, beside in-process SEED actors, and time for remote clients to
solve Catch. Results go to BENCHMARKS.md ("Remote environment throughput").

  python benchmarks/remote_throughput.py \
      --part=throughput --episodes=1,4,16,64 --seconds=8
  python benchmarks/remote_throughput.py \
      --part=solve --kind=node --processes=4
  python benchmarks/remote_throughput.py \
      --part=solve --agent=ppo --processes=4 --threads=4

throughput: SEED on `remote:catch` in local_mt (learner training; min(N, 4)
actors x N / actors slot environments), N
concurrent remote episodes from min(N, 4) Python client processes
(`repertory_remote.catch_client --threads`), actions/s and p50/p99 action
latency over all actions after a warm-up; then the same SEED program on
local `catch` with in-process actors stepping N environments
(min(N, 4) actors), actor steps/s from the counter.
solve: N client processes (node or python, `--threads` episodes at a time
each, default 1) play until the monitor's mean return of the last 100
episodes reaches 0.9; the final evaluation plays 20 episodes of local catch.
`--agent` picks the agent (seed by default; any agent of `repertory.agents`
whose actors step environments), with its default config except the
overrides in `SOLVE_CONFIGS`; its own actors step one environment per
concurrent remote episode.

Each row is printed as JSON as it is measured; at the end the script prints
the Markdown table (throughput) or row (solve) that BENCHMARKS.md shows,
under a line with the date, the CPU count and the load average.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
TOKEN = 'benchmark-token'
# Per-agent config overrides of the solve runs (defaults otherwise).
SOLVE_CONFIGS = {}
# The actors are min(N, 4) x N / actors environments for N concurrent
# episodes. PPO: the greedy evaluation on local catch (which judges
# --stop_at_return) every 2,000 steps.
SOLVE_EXPERIMENTS = {
    'ppo': dict(eval_every_steps=2_000),
    # R2D2's greedy evaluation swings between evaluations early on (one at
    # 1.0 stopped a run whose final evaluation was 0.5): a fixed budget, then
    # 100 final evaluation episodes.
    'r2d2': dict(stop_at_return=None, max_actor_steps=40_000,
                 eval_episodes=100)}


def _experiment(logdir, env, agent='seed', **kwargs):
  from repertory import experiment as experiment_lib  # pylint: disable=g-import-not-at-top
  values = dict(agent=agent, env=env, num_actors=1, envs_per_actor=1,
                max_actor_steps=10**9, eval_episodes=1, logdir=logdir,
                launch_type='local_mt', progress_every_seconds=5.0)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


def _client(kind, address_file, *args):
  env = dict(os.environ, REPERTORY_REMOTE_TOKEN=TOKEN,
             PYTHONPATH=os.pathsep.join([ROOT, os.environ.get('PYTHONPATH',
                                                              '')]))
  if kind == 'node':
    command = ['node', os.path.join(ROOT, 'clients', 'node',
                                    'catch_client.js')]
  else:
    command = [sys.executable, '-m', 'repertory_remote.catch_client']
  return subprocess.Popen(command + [f'--address_file={address_file}', *args],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, env=env)


def _remote_program(logdir, episodes, agent='seed', **kwargs):
  """The agent's program on `remote:catch` with one environment per
  concurrent remote episode: min(episodes, 4) actors."""
  # pylint: disable=g-import-not-at-top
  from repertory import agents
  from repertory.remote import options as options_lib
  from repertory.remote import program as remote_program
  # pylint: enable=g-import-not-at-top
  module = agents.get(agent)
  address_file = os.path.join(logdir, 'remote', 'address')
  actors = min(episodes, 4)
  kwargs = dict(dict(num_actors=actors, envs_per_actor=episodes // actors),
                **kwargs)
  program = remote_program.make_program(
      module.make_program, module.Config(**SOLVE_CONFIGS.get(agent, {})),
      _experiment(logdir, 'remote:catch', agent, **kwargs),
      options_lib.RemoteOptions(token_value=TOKEN, address_file=address_file))
  return program, address_file


def throughput(episodes, seconds):
  from repertory import launch  # pylint: disable=g-import-not-at-top
  from repertory.agents import seed  # pylint: disable=g-import-not-at-top
  rows = []
  for n in episodes:
    with tempfile.TemporaryDirectory() as logdir:
      program, address_file = _remote_program(logdir, n)
      launched = launch.launch(program, launch_type='local_mt',
                               termination_notice_secs=5, block=False)
      processes = min(n, 4)
      files = [os.path.join(logdir, f'latency{i}.npy')
               for i in range(processes)]
      clients = [_client('python', address_file, f'--threads={n // processes}',
                         f'--seconds={seconds}', f'--seed={i}',
                         f'--latency_file={files[i]}')
                 for i in range(processes)]
      results = [json.loads(c.communicate(timeout=seconds + 200)[0]
                            .strip().splitlines()[-1]) for c in clients]
      launched.stop(timeout=60)
      latencies = np.concatenate([np.load(f) for f in files]) * 1000
      actions = sum(r['actions'] for r in results)
      span = max(r['seconds'] for r in results)
      rows.append({'what': 'remote', 'episodes': n, 'processes': processes,
                   'actions_per_s': round(actions / span),
                   'latency_ms_p50': round(float(np.percentile(latencies, 50)),
                                           2),
                   'latency_ms_p99': round(float(np.percentile(latencies, 99)),
                                           2)})
      print(json.dumps(rows[-1]), flush=True)
    with tempfile.TemporaryDirectory() as logdir:
      actors = min(n, 4)
      program = seed.make_program(seed.Config(), _experiment(
          logdir, 'catch', num_actors=actors, envs_per_actor=n // actors))
      launched = launch.launch(program, launch_type='local_mt',
                               termination_notice_secs=5, block=False)
      counter = program.groups['counter'][0].create_handle().dereference()
      time.sleep(5.0)  # Warm-up (TF graphs, first weights).
      start_steps, start = counter.get_counts().get('actor_steps', 0), \
          time.monotonic()
      time.sleep(seconds)
      steps = counter.get_counts().get('actor_steps', 0) - start_steps
      elapsed = time.monotonic() - start
      launched.stop(timeout=60)
      rows.append({'what': 'in-process SEED actors', 'episodes': n,
                   'processes': actors,
                   'actions_per_s': round(steps / elapsed)})
      print(json.dumps(rows[-1]), flush=True)
  return rows


def throughput_table(rows):
  """The rows of `throughput` as a Markdown table, one line per N."""
  local = {r['episodes']: r['actions_per_s'] for r in rows
           if r['what'] != 'remote'}
  lines = ['| concurrent episodes N | remote actions/s | p50 latency (ms) | '
           'p99 latency (ms) | in-process SEED actor steps/s |',
           '|---:|---:|---:|---:|---:|']
  for r in rows:
    if r['what'] == 'remote':
      lines.append(f"| {r['episodes']} | {r['actions_per_s']:,} | "
                   f"{r['latency_ms_p50']:.1f} | {r['latency_ms_p99']:.1f} | "
                   f"{local.get(r['episodes'], 0):,} |")
  return '\n'.join(lines)


def solve_row(row, load):
  """A `solve` result as a row of BENCHMARKS.md's solve table."""
  def cell(value):
    return '—' if value is None else (
        f'{value:,}' if isinstance(value, int) else f'{value:.2f}')
  clients = (f"{row['processes']} {row['kind']} processes"
             f" × {row['episodes_per_process']} episodes")
  return (f"| {row['agent']}, {clients} | {row['wall_s']} | "
          f"{cell(row['actor_steps'])} | {cell(row['learner_steps'])} | "
          f"{cell(row['train_return_last_100'])} | "
          f"{cell(row['eval_return_mean'])} ({row['eval_episodes']} ep) | "
          f"{load} |")


def solve(kind, processes, timeout, agent='seed', threads=1):
  from repertory import launch  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as logdir:
    settings = dict(stop_at_return=0.9, eval_episodes=20,
                    max_actor_steps=500_000)
    settings.update(SOLVE_EXPERIMENTS.get(agent, {}))
    program, address_file = _remote_program(logdir, processes * threads,
                                            agent, **settings)
    start = time.monotonic()
    launched = launch.launch(program, launch_type='local_mt',
                             termination_notice_secs=5, block=False)
    concurrency = (f'--concurrent={threads}' if kind == 'node' else
                   f'--threads={threads}')
    clients = [_client(kind, address_file, f'--seconds={timeout}',
                       f'--seed={i + 1}', concurrency)
               for i in range(processes)]
    launched.wait(timeout=timeout)
    elapsed = time.monotonic() - start
    for c in clients:
      c.kill()
      c.wait()
    launched.stop(timeout=60)
    with open(os.path.join(logdir, 'results.json')) as f:
      results = json.load(f)
  row = {'what': f'solve catch, {agent}, {kind} clients', 'agent': agent,
         'kind': {'node': 'Node.js', 'python': 'Python'}[kind],
         'eval_episodes': settings['eval_episodes'],
         'processes': processes, 'episodes_per_process': threads,
         'solved': bool(results.get('eval_return_mean') is not None and
                        results['eval_return_mean'] >= 0.9),
         'wall_s': round(elapsed, 1),
         'actor_steps': results.get('actor_steps'),
         'learner_steps': results.get('learner_steps'),
         'eval_return_mean': results.get('eval_return_mean'),
         'train_return_last_100': results.get('episode_return_mean')}
  print(json.dumps(row), flush=True)
  return row


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--part', choices=('throughput', 'solve'),
                      default='throughput')
  parser.add_argument('--episodes', default='1,4,16,64')
  parser.add_argument('--seconds', type=float, default=8.0)
  parser.add_argument('--kind', choices=('python', 'node'), default='python')
  parser.add_argument('--processes', type=int, default=4)
  parser.add_argument('--threads', type=int, default=1,
                      help='concurrent episodes per client process')
  parser.add_argument('--agent', default='seed',
                      help='any agent of repertory.agents (impala, ppo, ...)')
  parser.add_argument('--timeout', type=float, default=240.0)
  args = parser.parse_args()
  started, load = time.gmtime(), os.getloadavg()[0]
  if args.part == 'throughput':
    rows = throughput([int(n) for n in args.episodes.split(',')],
                      args.seconds)
  else:
    row = solve(args.kind, args.processes, args.timeout, args.agent,
                args.threads)
  end_load = os.getloadavg()[0]
  print(f'\n{time.strftime("%Y-%m-%d %H:%M UTC", started)}, '
        f'{os.cpu_count()} CPUs, load average {load:.2f} at start, '
        f'{end_load:.2f} at end\n')
  if args.part == 'throughput':
    print(throughput_table(rows))
  else:
    print(solve_row(row, f'{load:.2f} at start, {end_load:.2f} at end'))


if __name__ == '__main__':
  main()
