r"""Steps/s and steps per CPU-second of the agents on a MinAtar game with
the MinAtar paper's network, against the raw stepping ceilings.

  python benchmarks/minatar_throughput.py                  # Breakout
  python benchmarks/minatar_throughput.py --env=minatar:seaquest \
      --run_modes=env,ceiling,impala --seconds=20 --out=/tmp/minatar.json

Modes, one after the other on the same machine:

* `env`: the game alone, `--envs_per_actor` environments stepped in one
  process with uniformly random actions (no policy): MinAtar's own ceiling;
* `ceiling`: `--num_actors` plain processes running an IMPALA actor's raw
  loop (the batched environments and the numpy forward of the conv network,
  `agent_throughput.actor_policy`), no framework;
* `impala`, `apex`: the agent's program in `local_mp`, learning on, its
  network chosen for the boards (`Config.torso='auto'`: the MinAtar
  network), no periodic evaluator; actor steps counted by the program over
  `--seconds` after `--warmup_seconds`, and the CPU seconds of all of its
  processes in that window (`actor_profile.CpuProbe`).

Steps per CPU-second are env steps over the CPU seconds the mode used
(user + system, all its processes): what a machine of C free cores could
reach at most with C times that rate. The table gives each mode's steps/s,
steps per CPU-second and the fraction of the `env` ceiling per CPU-second.
`--config=field=value` sets a field of the agents' Config as in
`agent_throughput.py`.
"""

import json
import os
import sys
import time
from typing import Any, Dict, List

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import actor_profile
import agent_throughput
# pylint: enable=g-import-not-at-top,wrong-import-position

_ENV = flags.DEFINE_string('env', 'minatar:breakout', 'A MinAtar game.')
_MINATAR_MODES = ('env', 'ceiling', 'impala', 'apex')
_RUN_MODES = flags.DEFINE_list('run_modes', list(_MINATAR_MODES),
                               f'What to measure: of {_MINATAR_MODES}.')
FLAGS = flags.FLAGS
# --num_actors (the first value), --envs_per_actor, --seconds,
# --warmup_seconds, --config and --out are agent_throughput.py's flags.


def measure_env(env_spec: str, num_envs: int, seconds: float
                ) -> Dict[str, float]:
  """The game alone: random actions, `num_envs` per batched step."""
  from repertory import environments  # pylint: disable=g-import-not-at-top
  env = environments.make_batched(env_spec, num_envs, seed=0, kind='serial')
  num_actions = env.action_spec().num_values
  rng = np.random.default_rng(0)
  env.reset()
  for _ in range(100):
    env.step(rng.integers(0, num_actions, num_envs))
  steps, start, cpu = 0, time.perf_counter(), time.process_time()
  while time.perf_counter() - start < seconds:
    env.step(rng.integers(0, num_actions, num_envs))
    steps += num_envs
  wall, used = time.perf_counter() - start, time.process_time() - cpu
  env.close()
  return {'steps_per_second': steps / wall,
          'steps_per_cpu_second': steps / used}


def measure_ceiling(env_spec: str, num_actors: int, num_envs: int,
                    seconds: float) -> Dict[str, float]:
  """`num_actors` raw actor loops (environments + numpy conv forward)."""
  loops = agent_throughput.measure_raw_loops(env_spec, num_actors, num_envs,
                                             seconds)
  return {'steps_per_second': sum(rate for rate, _ in loops),
          'steps_per_cpu_second': len(loops) / sum(cpu for _, cpu in loops)}


def measure_agent(agent: str, env_spec: str, num_actors: int, num_envs: int,
                  seconds: float, warmup: float) -> Dict[str, Any]:
  """The agent's program, learning on, with the CPU of all its processes."""
  from repertory import agents  # pylint: disable=g-import-not-at-top
  probe = actor_profile.CpuProbe(agent, profile_seconds=0.0, pyspy=False)
  result = agent_throughput.measure_program(
      agent, env_spec, num_actors, num_envs, True, seconds, warmup,
      probe=probe, config=agents.get(agent).Config())
  cpu = result['cpu_seconds']
  used = sum(v for k, v in cpu.items() if k != 'others')
  steps = result['actor_steps_per_second'] * result['window_seconds']
  return {'steps_per_second': result['actor_steps_per_second'],
          'steps_per_cpu_second': steps / max(used, 1e-9),
          'learner_steps_per_second': result['learner_steps_per_second'],
          'cpu_seconds': cpu, 'loadavg': result['loadavg']}


def main(argv: List[str]) -> None:
  del argv
  bad = sorted(set(_RUN_MODES.value) - set(_MINATAR_MODES))
  if bad:
    raise app.UsageError(f'--run_modes: {bad}; choose from {_MINATAR_MODES}.')
  env_spec, num_envs = _ENV.value, FLAGS.envs_per_actor
  num_actors = int(FLAGS.num_actors[0])
  seconds = FLAGS.seconds
  rows = {'env': env_spec, 'num_actors': num_actors,
          'envs_per_actor': num_envs,
          'loadavg_at_start': open('/proc/loadavg').read().split()[:3]}
  for mode in _RUN_MODES.value:
    print(f'== {env_spec} {mode}', flush=True)
    if mode == 'env':
      rows[mode] = measure_env(env_spec, num_envs, seconds)
    elif mode == 'ceiling':
      rows[mode] = measure_ceiling(env_spec, num_actors, num_envs, seconds)
    else:
      rows[mode] = measure_agent(
          mode, env_spec, num_actors, num_envs, seconds,
          FLAGS.warmup_seconds)
    print(f'   {json.dumps(rows[mode])}', flush=True)
  # rows['env'] is the game's name unless the 'env' mode ran.
  base = (rows['env'].get('steps_per_cpu_second')
          if 'env' in _RUN_MODES.value else None)
  print(f'\n{env_spec}, {num_actors} actors x {num_envs} envs, load '
        f'{" ".join(rows["loadavg_at_start"])} at start\n')
  print('| mode | steps/s | steps per CPU-second | of the env ceiling |')
  print('|---|---|---|---|')
  for mode in _RUN_MODES.value:
    row = rows[mode]
    share = (f'{row["steps_per_cpu_second"] / base:.3f}' if base else '-')
    print(f'| {mode} | {row["steps_per_second"]:,.0f} | '
          f'{row["steps_per_cpu_second"]:,.0f} | {share} |')
  if FLAGS.out:
    with open(FLAGS.out, 'w') as f:
      json.dump(rows, f, indent=2)


if __name__ == '__main__':
  sys.exit(app.run(main))
