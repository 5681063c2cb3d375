r"""Actor steps per second of IMPALA and SEED against the raw-loop ceiling.

  python benchmarks/agent_throughput.py                # everything
  python benchmarks/agent_throughput.py --envs=catch --num_actors=1,2 \
      --modes=ceiling,impala_nolearn --seconds=10

For each environment and number of actors A it measures, one after the other
on the same machine:

* `ceiling`: A plain processes, each running only the raw acting loop of an
  actor: the same batched environment (same kind, same envs_per_actor) and
  the same batched policy forward (IMPALA's actor policy, `actor_policy`),
  no framework, no Reverb, no learner;
* `impala_nolearn` / `seed_nolearn`: the agent's program in `local_mp` with
  learning disabled (`Config.train=False`: the learner only serves weights,
  the queue drops its oldest unrolls), so the figure isolates the
  framework's own overhead (adder, Reverb, variable client, counter,
  inference calls);
* `impala` / `seed`: the same with learning on.

The programs run without the periodic evaluator and never stop on a solved
environment (`eval_every_steps=0`, `stop_at_return=None`): the figure is
acting alone. Program rates are steady-state: actor steps counted by the
program's `Counter` over `--seconds` after a warm-up, read from the
launcher. The table printed at the end (and written to `--out` as JSON)
gives steps/s and the ratio to the ceiling.
"""

import dataclasses
import functools
import json
import multiprocessing
import os
import sys
import time
from typing import Any, Dict, List

from absl import app
from absl import flags

_ENVS = flags.DEFINE_list('envs', ['catch', 'envpool:CartPole-v1'],
                          'Environment specs.')
_NUM_ACTORS = flags.DEFINE_list('num_actors', ['1', '2', '4'],
                                'Numbers of actors.')
_MODES = flags.DEFINE_list(
    'modes', ['ceiling', 'impala_nolearn', 'impala', 'seed_nolearn', 'seed'],
    'What to measure.')
_ENVS_PER_ACTOR = flags.DEFINE_integer('envs_per_actor', 8,
                                       'Environments per actor.')
_SECONDS = flags.DEFINE_float('seconds', 15.0, 'Measurement window.')
_WARMUP = flags.DEFINE_float('warmup_seconds', 10.0,
                             'Seconds after the first actor step before '
                             'measuring.')
_OUT = flags.DEFINE_string('out', '', 'Write the results here (JSON).')
_BATCHED_ITEMS = flags.DEFINE_bool(
    'batched_items', None,
    "The programs' Config.batched_items (one Reverb item per actor and "
    "unroll); unset: the agent's default.")
_CONFIG = flags.DEFINE_multi_string(
    'config', [], "field=value: sets a field of the programs' agent Config "
    '(e.g. --config=variable_update_period=100), as `--config.<field>` does '
    'for `python -m repertory.run`.')

_RESOURCES = flags.DEFINE_string(
    'resources', None, "The programs' local_resources, as --lp_resources "
    'takes them (e.g. "actor=cpus:1 learner=cpus:0": the actors\' and the '
    "learner's processes pinned to cores 1 and 0).")


def _config_settings(settings: List[str]) -> Dict[str, str]:
  """{field: text} from --config=field=value settings."""
  for setting in settings:
    if '=' not in setting:
      raise app.UsageError(f'--config={setting!r}: expected field=value, '
                           'e.g. --config=variable_update_period=100.')
  return dict(setting.split('=', 1) for setting in settings)


def actor_policy(config: Any, env: Any, seed: int) -> Any:
  """IMPALA's actor policy (`actor_critic.acting.make_policy`: numpy for a
  feedforward network) with the network's initial weights."""
  # pylint: disable=g-import-not-at-top
  from repertory.components import networks
  from repertory.agents.actor_critic import acting
  from repertory.agents.actor_critic import networks as actor_critic_nets
  # pylint: enable=g-import-not-at-top
  policy, _ = acting.make_policy(config, seed)
  with networks.seeded(seed):
    network = actor_critic_nets.make_network(
        config, env.observation_spec(), env.action_spec())
  policy.set_weights(networks.get_variables(network))
  return policy


def _raw_loop(env_spec: str, num_envs: int, seed: int, seconds: float,
              warmup_steps: int, queue, start_event) -> None:
  """One plain process: batched env + batched policy forward, nothing else.

  It warms up, says 'ready', and waits for `start_event` so that all the
  processes of one ceiling measure the same window (a process that started
  early would otherwise run part of its window alone).
  """
  from repertory.agents.impala import config as config_lib  # pylint: disable=g-import-not-at-top
  from repertory.agents.actor_critic import config as actor_critic_config  # pylint: disable=g-import-not-at-top
  from repertory import environments  # pylint: disable=g-import-not-at-top
  from repertory.components import actors  # pylint: disable=g-import-not-at-top
  from repertory import launch  # pylint: disable=g-import-not-at-top
  actors.limit_tf_threads()
  launch.limit_blas_threads()  # As in the programs' node processes.
  config = config_lib.Config()
  env = environments.make_batched(
      env_spec, num_envs, seed=seed,
      kind=actor_critic_config.batched_env_kind(config.batched_env_kind,
                                                env_spec))
  policy = actor_policy(config, env, seed)
  state = policy.initial_state(num_envs)
  timestep = env.reset()

  def step():
    nonlocal timestep, state
    action, _, state = policy.step(timestep.observation, state,
                                   timestep.first())
    timestep = env.step(action)

  for _ in range(warmup_steps):
    step()
  queue.put('ready')
  start_event.wait()
  steps, start, cpu = 0, time.perf_counter(), time.process_time()
  while time.perf_counter() - start < seconds:
    step()
    steps += 1
  # (env steps/s, CPU seconds per env step) of this process.
  queue.put((steps * num_envs / (time.perf_counter() - start),
             (time.process_time() - cpu) / max(steps * num_envs, 1)))
  env.close()


def measure_ceiling(env_spec: str, num_actors: int, num_envs: int,
                    seconds: float) -> float:
  """The summed env steps/s of `num_actors` raw-loop processes."""
  return sum(rate for rate, _ in measure_raw_loops(env_spec, num_actors,
                                                   num_envs, seconds))


def measure_raw_loops(env_spec: str, num_actors: int, num_envs: int,
                      seconds: float) -> List[Any]:
  """(env steps/s, CPU seconds per env step) of each of `num_actors`
  raw-loop processes measuring one common window."""
  context = multiprocessing.get_context('spawn')
  queue, start_event = context.Queue(), context.Event()
  processes = [context.Process(
      target=_raw_loop, args=(env_spec, num_envs, i * num_envs, seconds, 200,
                              queue, start_event))
               for i in range(num_actors)]
  for p in processes:
    p.start()
  results = [queue.get(timeout=600) for _ in range(num_actors)]
  assert all(r == 'ready' for r in results), results
  start_event.set()
  results = [queue.get(timeout=600) for _ in range(num_actors)]
  for p in processes:
    p.join(60)
  return [tuple(float(x) for x in r) for r in results]


def measure_program(agent: str, env_spec: str, num_actors: int,
                    num_envs: int, train: bool, seconds: float,
                    warmup: float, probe: Any = None,
                    config: Any = None) -> Dict[str, Any]:
  """Steady-state actor (and learner) steps/s of a program in local_mp.

  `probe` (optional) has `start(launched)` and `stop(launched) -> dict`,
  called at the two ends of the measurement window, and
  `after(launched) -> dict`, called after it (still running); their dicts
  are merged into the result (`actor_profile.py` reads each node process's
  CPU time and samples an actor's stacks there). `config` (optional): the
  agent's `Config` instead of `Config(train=train)` (agents without
  `train`).
  """
  from repertory import agents  # pylint: disable=g-import-not-at-top
  from repertory import experiment as experiment_lib  # pylint: disable=g-import-not-at-top
  from repertory import launch  # pylint: disable=g-import-not-at-top
  from repertory import overrides  # pylint: disable=g-import-not-at-top
  module = agents.get(agent)
  config = module.Config(train=train) if config is None else config
  if _BATCHED_ITEMS.value is not None:
    config = dataclasses.replace(config, batched_items=_BATCHED_ITEMS.value)
  config = overrides.apply(config, _config_settings(_CONFIG.value))
  logdir = os.path.join('/tmp/repertory_bench',
                        f'{agent}-{env_spec.replace(":", "_")}-{num_actors}-'
                        f'{int(train)}-{int(time.time())}')
  experiment = experiment_lib.ExperimentConfig(
      agent=agent, env=env_spec, num_actors=num_actors,
      envs_per_actor=num_envs, max_actor_steps=10**12, eval_episodes=1,
      eval_every_steps=0,  # No periodic evaluator: acting only.
      stop_at_return=None,  # Never stops on a solved environment.
      logdir=logdir, launch_type='local_mp', progress_every_seconds=30.0)
  program = module.make_program(config, experiment)
  launched = launch.launch(program, launch_type='local_mp', block=False,
                           logdir=os.path.join(logdir, 'nodes'),
                           termination_notice_secs=5,
                           local_resources=launch.parse_resources(
                               _RESOURCES.value) if _RESOURCES.value else None)
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    deadline = time.monotonic() + 600
    while counter.get_counts().get('actor_steps', 0) == 0:
      if time.monotonic() > deadline or not launched.is_running():
        raise RuntimeError(f'{agent} on {env_spec}: no actor steps; see '
                           f'{logdir}/nodes.')
      time.sleep(0.5)
    time.sleep(warmup)
    extra = {}
    if probe is not None:
      probe.start(launched)
    c0, t0 = counter.get_counts(), time.monotonic()
    time.sleep(seconds)
    c1, t1 = counter.get_counts(), time.monotonic()
    if probe is not None:
      extra.update(probe.stop(launched))
      extra.update(probe.after(launched))
  finally:
    launched.stop(timeout=120)
  dt = t1 - t0
  return dict(
      extra,
      actor_steps_per_second=(
          c1.get('actor_steps', 0) - c0.get('actor_steps', 0)) / dt,
      learner_steps_per_second=(
          c1.get('learner_steps', 0) - c0.get('learner_steps', 0)) / dt,
      window_seconds=dt,
      batch_timeout_ms=getattr(config, 'batch_timeout_ms', None))  # SEED's.


def main(argv: List[str]) -> None:
  del argv
  rows = []
  for env_spec in _ENVS.value:
    for num_actors in [int(a) for a in _NUM_ACTORS.value]:
      row = {'env': env_spec, 'num_actors': num_actors,
             'envs_per_actor': _ENVS_PER_ACTOR.value}
      for mode in _MODES.value:
        print(f'== {env_spec} actors={num_actors} {mode}', flush=True)
        if mode == 'ceiling':
          row['ceiling'] = measure_ceiling(env_spec, num_actors,
                                           _ENVS_PER_ACTOR.value,
                                           _SECONDS.value)
        else:
          agent, _, nolearn = mode.partition('_')
          result = measure_program(agent, env_spec, num_actors,
                                   _ENVS_PER_ACTOR.value, not nolearn,
                                   _SECONDS.value, _WARMUP.value)
          row[mode] = result['actor_steps_per_second']
          row[mode + '_learner_steps_per_second'] = result[
              'learner_steps_per_second']
        print(f'   {json.dumps(row)}', flush=True)
      rows.append(row)
  modes = [m for m in _MODES.value]
  header = ['env', 'actors'] + modes
  print('\n| ' + ' | '.join(header) + ' |')
  print('|' + '---|' * len(header))
  for row in rows:
    cells = [row['env'], str(row['num_actors'])]
    for mode in modes:
      value = row.get(mode)
      if value is None:
        cells.append('-')
      elif mode == 'ceiling' or 'ceiling' not in row:
        cells.append(f'{value:,.0f}')
      else:
        cells.append(f'{value:,.0f} ({value / row["ceiling"]:.2f})')
    print('| ' + ' | '.join(cells) + ' |')
  if _OUT.value:
    with open(_OUT.value, 'w') as f:
      json.dump(rows, f, indent=2)


if __name__ == '__main__':
  sys.exit(app.run(main))
