"""Adder throughput on `catch`: repertory adders against bare TrajectoryWriter loops.

Environment steps are generated first (the environment's cost is measured
separately, as the 'raw env loop' row), then each writer writes the same
steps into its own table of a real in-process Reverb server. Prints a
Markdown table of env steps written per second and the cost per step, under
a line with the date, the CPU count and the load average.

  python benchmarks/adder_throughput.py [--steps 20000] [--num_envs 16]
"""

import argparse
import os
import time

import numpy as np
import reverb
import tensorflow as tf

from repertory import environments
from repertory.components import adders
from repertory.components import replay

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

N_STEP, SEQ_LEN, PERIOD, UNROLL = 3, 20, 10, 20
NUM_ACTIONS = 3


def make_single_steps(num_steps, seed=0):
  env = environments.make('catch', seed=seed)
  rng = np.random.default_rng(seed)
  steps, ts = [], env.reset()
  first = ts
  start = time.perf_counter()
  for _ in range(num_steps):
    if ts.last():
      ts = env.reset()
      steps.append(('first', ts))
      continue
    action = np.int32(rng.integers(NUM_ACTIONS))
    ts = env.step(action)
    steps.append((action, ts))
  raw = num_steps / (time.perf_counter() - start)
  return first, steps, raw


def make_batched_steps(num_batched, num_envs, seed=0):
  env = environments.make_batched('catch', num_envs=num_envs, seed=seed)
  rng = np.random.default_rng(seed)
  first = env.reset()
  steps = []
  start = time.perf_counter()
  for _ in range(num_batched):
    actions = rng.integers(NUM_ACTIONS, size=num_envs).astype(np.int32)
    steps.append((actions, env.step(actions)))
  raw = num_batched * num_envs / (time.perf_counter() - start)
  return first, steps, raw


def logits_for(n=None):
  shape = (NUM_ACTIONS,) if n is None else (n, NUM_ACTIONS)
  return np.zeros(shape, np.float32)


# --- adders -----------------------------------------------------------------

def run_single_adder(adder, first, steps):
  adder.add_first(first)
  extras = {'logits': logits_for()}
  for action, ts in steps:
    if isinstance(action, str):
      adder.add_first(ts)
    else:
      adder.add(action, ts, extras=extras)
  adder.flush()


def run_unroll_adder(adder, first, steps, num_envs):
  adder.add_first(first)
  extras = {'logits': logits_for(num_envs)}
  for actions, ts in steps:
    adder.add(actions, ts, extras=extras)
  adder.flush()


# --- bare TrajectoryWriter loops writing the same data ----------------------

def bare_n_step(client, table, first, steps):
  """One append per step; an n-step item per step, R and D in numpy."""
  writer = client.trajectory_writer(2 * N_STEP + 2)
  logits = logits_for()
  obs, rewards, discounts = first.observation, [], []
  for action, ts in steps:
    if isinstance(action, str):
      writer.end_episode()
      obs, rewards, discounts = ts.observation, [], []
      continue
    rewards.append(float(ts.reward))
    discounts.append(float(ts.discount))
    ret = sum(r * 0.99 ** i for i, r in enumerate(rewards[-N_STEP:]))
    writer.append({'observation': obs, 'action': action,
                   'extras': {'logits': logits},
                   'n_step_return': np.float32(ret),
                   'total_discount': np.float32(0.99 ** N_STEP)})
    obs = ts.observation
    if len(rewards) > N_STEP:
      h = writer.history
      writer.create_item(table, 1.0, {
          'observation': h['observation'][-N_STEP - 1],
          'action': h['action'][-N_STEP - 1],
          'reward': h['n_step_return'][-1],
          'discount': h['total_discount'][-1],
          'next_observation': h['observation'][-1]})
      writer.flush(16)
  writer.flush()
  writer.close()


def bare_sequence(client, table, first, steps):
  """One append per step; a sequence item every PERIOD steps, across
  episodes (catch's episodes are shorter than a sequence)."""
  writer = client.trajectory_writer(SEQ_LEN + 1)
  logits = logits_for()
  obs, step_type, count = first.observation, np.int32(0), 0
  for action, ts in steps:
    if isinstance(action, str):
      writer.append({'observation': obs, 'action': np.int32(0),
                     'reward': np.float32(0), 'discount': np.float32(0),
                     'step_type': np.int32(2), 'extras': {'logits': logits}})
      writer.end_episode(clear_buffers=False)
      obs, step_type, count = ts.observation, np.int32(0), count + 1
      if count >= SEQ_LEN and (count - SEQ_LEN) % PERIOD == 0:
        h = writer.history
        writer.create_item(table, 1.0, {
            k: v[-SEQ_LEN:] if k != 'extras' else
            {'logits': v['logits'][-SEQ_LEN:]} for k, v in h.items()})
        writer.flush(4)
      continue
    writer.append({'observation': obs, 'action': action,
                   'reward': np.float32(ts.reward),
                   'discount': np.float32(ts.discount),
                   'step_type': step_type, 'extras': {'logits': logits}})
    obs, step_type, count = ts.observation, np.int32(1), count + 1
    if count >= SEQ_LEN and (count - SEQ_LEN) % PERIOD == 0:
      h = writer.history
      writer.create_item(table, 1.0, {k: v[-SEQ_LEN:] if k != 'extras' else
                                      {'logits': v['logits'][-SEQ_LEN:]}
                                      for k, v in h.items()})
      writer.flush(4)
  writer.flush()
  writer.close()


def bare_unroll(client, table, first, steps, num_envs):
  """The per-step way: one writer per env, one append per env per step."""
  writers = [client.trajectory_writer(UNROLL + 1) for _ in range(num_envs)]
  logits = logits_for()
  obs = first.observation
  for t, (actions, ts) in enumerate(steps, start=1):
    for i, writer in enumerate(writers):
      writer.append({'observation': obs[i], 'action': actions[i],
                     'reward': ts.reward[i], 'discount': ts.discount[i],
                     'step_type': np.int32(ts.step_type[i]),
                     'extras': {'logits': logits}})
      if t % UNROLL == 0:
        h = writer.history
        writer.create_item(table, 1.0, {
            k: v[-UNROLL:] if k != 'extras' else
            {'logits': v['logits'][-UNROLL:]} for k, v in h.items()})
    if t % UNROLL == 0:
      for writer in writers:
        writer.flush(1)
    obs = ts.observation
  for writer in writers:
    writer.flush()
    writer.close()


def timed(fn, num_env_steps):
  start = time.perf_counter()
  fn()
  return num_env_steps / (time.perf_counter() - start)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=20000,
                      help='environment steps per single-env row')
  parser.add_argument('--num_envs', type=int, default=16)
  args = parser.parse_args()
  started, load = time.gmtime(), os.getloadavg()[0]

  spec = adders.make_environment_spec(environments.make('catch'))
  extras = {'logits': np.zeros(NUM_ACTIONS, np.float32)}
  big = 10 ** 7
  tables = [
      replay.uniform_replay_table(
          'n_step', big, signature=adders.NStepTransitionAdder.signature(
              spec, extras)),
      replay.uniform_replay_table(
          'sequence', big, signature=adders.SequenceAdder.signature(
              spec, SEQ_LEN, extras, end_of_episode_behavior='continue')),
      replay.uniform_replay_table(
          'unroll', big, signature=adders.UnrollAdder.signature(
              spec, UNROLL, extras)),
      replay.uniform_replay_table(
          'unroll_batched', big, signature=adders.UnrollAdder.signature(
              spec, UNROLL, extras, envs_per_item=args.num_envs)),
      replay.uniform_replay_table('bare_n_step', big),
      replay.uniform_replay_table('bare_sequence', big),
      replay.uniform_replay_table('bare_unroll', big),
  ]
  server = reverb.Server(tables)
  client = reverb.Client(f'localhost:{server.port}')

  first, steps, raw_single = make_single_steps(args.steps)
  num_batched = max(UNROLL, args.steps // args.num_envs)
  num_batched -= num_batched % UNROLL
  bfirst, bsteps, raw_batched = make_batched_steps(num_batched, args.num_envs)
  n_single = len(steps)
  n_batched = num_batched * args.num_envs

  rows = [('raw env loop (catch, 1 env)', raw_single, None),
           (f'raw env loop (catch, {args.num_envs} envs serial)', raw_batched,
            None)]
  bare = timed(lambda: bare_n_step(client, 'bare_n_step', first, steps),
               n_single)
  ours = timed(lambda: run_single_adder(adders.NStepTransitionAdder(
      client, N_STEP, 0.99, 'n_step'), first, steps), n_single)
  rows += [(f'bare TrajectoryWriter, {N_STEP}-step transitions', bare, None),
           (f'NStepTransitionAdder (n={N_STEP})', ours, bare)]
  bare = timed(lambda: bare_sequence(client, 'bare_sequence', first, steps),
               n_single)
  ours = timed(lambda: run_single_adder(adders.SequenceAdder(
      client, 'sequence', SEQ_LEN, PERIOD, 'continue'), first, steps),
                n_single)
  rows += [(f'bare TrajectoryWriter, sequences {SEQ_LEN}/{PERIOD}', bare,
            None),
           (f'SequenceAdder (length {SEQ_LEN}, period {PERIOD})', ours, bare)]
  bare = timed(lambda: bare_unroll(client, 'bare_unroll', bfirst, bsteps,
                                   args.num_envs), n_batched)
  ours = timed(lambda: run_unroll_adder(adders.UnrollAdder(
      client, 'unroll', UNROLL, args.num_envs, environment_spec=spec),
                                        bfirst, bsteps, args.num_envs),
               n_batched)
  batched = timed(lambda: run_unroll_adder(adders.UnrollAdder(
      client, 'unroll_batched', UNROLL, args.num_envs, environment_spec=spec,
      batched_items=True), bfirst, bsteps, args.num_envs), n_batched)
  rows += [(f'bare TrajectoryWriter per env per step, unrolls T={UNROLL}, '
            f'N={args.num_envs}', bare, None),
           (f'UnrollAdder (T={UNROLL}, N={args.num_envs})', ours, bare),
           (f'UnrollAdder (T={UNROLL}, N={args.num_envs}), batched_items',
            batched, bare)]

  print(f'\n{time.strftime("%Y-%m-%d %H:%M UTC", started)}, '
        f'{os.cpu_count()} CPUs, load average {load:.2f} at start, '
        f'{os.getloadavg()[0]:.2f} at end\n')
  print('| writer (catch, random actions) | env steps/s | us per env step '
        '| vs bare writer |')
  print('|---|---:|---:|---:|')
  for name, rate, reference in rows:
    ratio = f'{rate / reference:.2f}x' if reference else ''
    print(f'| {name} | {rate:,.0f} | {1e6 / rate:.1f} | {ratio} |')
  sizes = {name: info.current_size
           for name, info in client.server_info().items()}
  print('\nitems written:', sizes)
  server.stop()


if __name__ == '__main__':
  main()
