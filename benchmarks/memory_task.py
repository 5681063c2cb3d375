r"""R2D2 against Ape-X on bsuite's memory task, and the effect of burn-in and
the stored state: learning curves (PNG) and a results table.

  python benchmarks/memory_task.py --env=bsuite:memory_len/9 \
      --max_actor_steps=40000 --variants=r2d2,r2d2_no_burn_in,apex

Each variant is one `python -m repertory.run` (local_mp), run one after the
other; `--variants` picks among:

  r2d2              burn-in and the stored LSTM state (the paper's setting)
  r2d2_no_burn_in   the stored state, no burn-in (config.use_burn_in=false)
  r2d2_zero_state   burn-in from the zero state (use_stored_state=false)
  apex              feed-forward Ape-X DQN (no memory: chance level, 0)

The memory length of `bsuite:memory_len/<id>` is 10 steps for id 9 (see
bsuite.sweep.SETTINGS). The curves go to
`benchmarks/figures/memory_task.png`, the table to stdout and
`<logroot>/summary.json`.
"""

import json
import os
import subprocess
import sys

from absl import app
from absl import flags

VARIANTS = {
    'r2d2': ('r2d2', []),
    'r2d2_no_burn_in': ('r2d2', ['--config.use_burn_in=false']),
    'r2d2_zero_state': ('r2d2', ['--config.use_stored_state=false']),
    'apex': ('apex', []),
}

_ENV = flags.DEFINE_string('env', 'bsuite:memory_len/9', 'The memory task.')
_VARIANTS = flags.DEFINE_list('variants', ['r2d2', 'r2d2_no_burn_in', 'apex'],
                              f'Among {sorted(VARIANTS)}.')
_MAX_ACTOR_STEPS = flags.DEFINE_integer('max_actor_steps', 40_000,
                                        'Actor-step budget of each run.')
_NUM_ACTORS = flags.DEFINE_integer('num_actors', 2, 'Actors per run.')
_ENVS_PER_ACTOR = flags.DEFINE_integer('envs_per_actor', 8,
                                       'Environments per actor.')
_EVAL_EPISODES = flags.DEFINE_integer('eval_episodes', 100,
                                      'Final evaluation episodes.')
_LOGROOT = flags.DEFINE_string('logroot', 'runs/memory_task',
                               'Run directories go under here.')
_FIGURE = flags.DEFINE_string('figure', 'benchmarks/figures/memory_task.png',
                              'Where the learning curves go.')
_SKIP_EXISTING = flags.DEFINE_bool(
    'skip_existing', True, 'Reuse a variant whose results.json exists.')


def run_variant(name: str) -> dict:
  """Runs one variant (unless done) and returns its results.json."""
  agent, overrides = VARIANTS[name]
  logdir = os.path.abspath(os.path.join(_LOGROOT.value, name))
  results_path = os.path.join(logdir, 'results.json')
  if not _SKIP_EXISTING.value and os.path.exists(results_path):
    # repertory.run would resume the finished run (its budget is spent).
    raise ValueError(f'{logdir} holds a finished run: remove it or pass a '
                     'fresh --logroot to run the variant again.')
  if not os.path.exists(results_path):
    # An unfinished run in `logdir` resumes from its checkpoint and counts.
    command = [
        sys.executable, '-m', 'repertory.run', f'--agent={agent}',
        f'--env={_ENV.value}', '--lp_launch_type=local_mp',
        f'--num_actors={_NUM_ACTORS.value}',
        f'--envs_per_actor={_ENVS_PER_ACTOR.value}',
        f'--max_actor_steps={_MAX_ACTOR_STEPS.value}',
        '--stop_at_return=never',
        f'--eval_episodes={_EVAL_EPISODES.value}',
        f'--logdir={logdir}'] + overrides
    print('$', ' '.join(command), flush=True)
    subprocess.run(command, check=True)
  with open(results_path) as f:
    return json.load(f)


def main(argv):
  del argv
  unknown = [v for v in _VARIANTS.value if v not in VARIANTS]
  if unknown:
    raise app.UsageError(f'Unknown variants {unknown}; choose among '
                         f'{sorted(VARIANTS)}.')
  summary = {}
  for name in _VARIANTS.value:
    results = run_variant(name)
    summary[name] = {k: results.get(k) for k in (
        'eval_return_mean', 'eval_episodes', 'actor_steps', 'learner_steps',
        'wall_seconds', 'episode_return_mean')}
  os.makedirs(os.path.dirname(_FIGURE.value) or '.', exist_ok=True)
  subprocess.run([sys.executable, '-m', 'repertory.plot',
                  f'--out={_FIGURE.value}'] +
                 [os.path.join(_LOGROOT.value, v) for v in _VARIANTS.value],
                 check=True)
  with open(os.path.join(_LOGROOT.value, 'summary.json'), 'w') as f:
    json.dump(summary, f, indent=2)
  print(f'| variant | eval return (mean over episodes) | actor steps | '
        f'learner steps | wall s |')
  print('|---|---|---|---|---|')
  for name, row in summary.items():
    print(f'| {name} | {row["eval_return_mean"]:.3f} '
          f'({row["eval_episodes"]} ep) | {row["actor_steps"]} | '
          f'{row["learner_steps"]} | {row["wall_seconds"]:.0f} |')


if __name__ == '__main__':
  app.run(main)
