r"""Throughput of R2D2's replay path: sequences inserted and sampled per
second with 1, 2 and 4 actors in local_mp, and the measured samples-per-insert
ratio against the configured one (the `SampleToInsertRatio` limiter should
hold it whatever the number of actors).

  python benchmarks/replay_path.py --actors=1,2,4 --max_actor_steps=20000

Each setting runs the R2D2 program on `--env` (default catch) with a probe
node that reads the table's insert and sample counters every second; rates
are measured after the table first allows sampling. Prints a markdown table
and writes `<logroot>/replay_path.json`.
"""

import json
import os
import time

from absl import app
from absl import flags

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import r2d2

_ACTORS = flags.DEFINE_list('actors', ['1', '2', '4'], 'Actor counts.')
_ENV = flags.DEFINE_string('env', 'catch', 'Environment.')
_ENVS_PER_ACTOR = flags.DEFINE_integer('envs_per_actor', 8, 'Envs per actor.')
_MAX_ACTOR_STEPS = flags.DEFINE_integer('max_actor_steps', 20_000,
                                        'Actor steps per setting.')
_SAMPLES_PER_INSERT = flags.DEFINE_float('samples_per_insert', 2.0,
                                         'The configured ratio.')
_LOGROOT = flags.DEFINE_string('logroot', 'runs/replay_path', 'Run dirs.')


def probe(replay, path: str, period_s: float = 1.0) -> None:
  """Appends (time, inserts, samples, size) rows of the R2D2 table."""
  stop = launch.stop_event()
  rows = []
  while not stop.wait(period_s):
    try:
      info = replay.server_info(timeout=5)[r2d2.TABLE]
    except Exception:  # pylint: disable=broad-except
      break
    limiter = info.rate_limiter_info
    rows.append((time.time(), int(limiter.insert_stats.completed),
                 int(limiter.sample_stats.completed), int(info.current_size)))
    with open(path, 'w') as f:
      json.dump(rows, f)


def measure(num_actors: int) -> dict:
  config = r2d2.Config(samples_per_insert=_SAMPLES_PER_INSERT.value)
  logdir = os.path.abspath(os.path.join(_LOGROOT.value, f'actors{num_actors}'))
  if os.path.exists(logdir):
    # A run in an existing logdir would resume its learner and counts.
    raise ValueError(f'{logdir} exists: pass a fresh --logroot (or remove '
                     'it) so that every setting starts from scratch.')
  os.makedirs(logdir)
  experiment = experiment_lib.ExperimentConfig(
      agent='r2d2', env=_ENV.value, num_actors=num_actors,
      envs_per_actor=_ENVS_PER_ACTOR.value,
      max_actor_steps=_MAX_ACTOR_STEPS.value, eval_episodes=1,
      logdir=logdir, launch_type='local_mp')
  program = r2d2.make_program(config, experiment)
  replay = program.groups['replay'][0].create_handle()
  path = os.path.join(logdir, 'probe.json')
  with program.group('probe'):
    program.add_node(launch.PyNode(probe, replay, path))
  launch.launch(program, launch_type='local_mp',
                logdir=os.path.join(logdir, 'nodes'))
  with open(path) as f:
    rows = json.load(f)
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  # From the first row where the learner sampled to the last row.
  started = [r for r in rows if r[2] > 0]
  if len(started) < 2:
    raise RuntimeError(f'The probe saw the learner sample in {len(started)} '
                       f'rows of {path}; raise --max_actor_steps.')
  first, last = started[0], started[-1]
  seconds = last[0] - first[0]
  inserts, samples = last[1] - first[1], last[2] - first[2]
  return {
      'actors': num_actors,
      'inserts_per_s': inserts / seconds,
      'samples_per_s': samples / seconds,
      'measured_samples_per_insert': samples / max(inserts, 1),
      # Over the whole run, from the learner's own count.
      'whole_run_samples_per_insert': (
          results['learner_steps'] * config.batch_size / max(last[1], 1)),
      'configured_samples_per_insert': config.samples_per_insert,
      'seconds': seconds,
      'actor_steps_per_s': results['actor_steps_per_second'],
      'learner_steps': results['learner_steps'],
  }


def main(argv):
  del argv
  results = [measure(int(n)) for n in _ACTORS.value]
  with open(os.path.join(_LOGROOT.value, 'replay_path.json'), 'w') as f:
    json.dump(results, f, indent=2)
  print('| actors | actor steps/s | inserts/s | samples/s | samples per '
        'insert: measured (whole run) / configured | seconds measured |')
  print('|---|---|---|---|---|---|')
  for r in results:
    print(f'| {r["actors"]} | {r["actor_steps_per_s"]:.0f} | '
          f'{r["inserts_per_s"]:.1f} | {r["samples_per_s"]:.1f} | '
          f'{r["measured_samples_per_insert"]:.2f} '
          f'({r["whole_run_samples_per_insert"]:.2f}) / '
          f'{r["configured_samples_per_insert"]:.2f} | {r["seconds"]:.0f} |')


if __name__ == '__main__':
  app.run(main)
