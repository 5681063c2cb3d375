r"""Trains any built-in agent on any environment, in any launch mode.

  python -m repertory.run                       # IMPALA on catch, local_mp
  python -m repertory.run --agent=seed --env=gym:CartPole-v1 \
      --num_actors=4 --config.learning_rate=3e-4 --lp_launch_type=local_mp

`--config.<field>=<value>` overrides a field of the agent's `Config`; unknown
agents, environments and fields are refused before anything starts. At the end
`<logdir>/results.json` holds the run's figures (and
`<logdir>/attempts/<n>/results.json` those of each attempt; see
docs/checkpoints.md).

Rerunning the same command with the same `--logdir` resumes the run (the
learner from its latest checkpoint, counters, replay and logs where they
were); a rerun whose settings differ from `<logdir>/config.json` is refused
with the differing fields named (only the fields in `RESUMABLE_CHANGES` may
change). Rerunning a finished run is refused unless `--max_actor_steps` is
raised above the steps it took.
"""

import dataclasses
import json
import os
# TensorFlow's INFO banner at import is not the run's output (an error stays
# one line on stderr); its warnings and errors still show.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

from absl import app
from absl import flags
from absl import logging

from repertory import agents
from repertory import experiment as experiment_lib
from repertory import launch
from repertory import overrides as overrides_lib
from repertory import rundir
from repertory.components import checkpointing
from repertory.remote import flags as remote_flags

_AGENT = flags.DEFINE_string('agent', 'impala',
                             f'One of: {", ".join(sorted(agents.AGENTS))}.')
_ENV = flags.DEFINE_string('env', 'catch', 'An environment spec, e.g. catch, '
                           'gym:CartPole-v1, bsuite:memory_len/3.')
_NUM_ACTORS = flags.DEFINE_integer('num_actors', 2, 'Actor nodes.')
_ENVS_PER_ACTOR = flags.DEFINE_integer(
    'envs_per_actor', 8, 'Environments each actor steps per policy call.')
_MAX_ACTOR_STEPS = flags.DEFINE_integer('max_actor_steps', 2_000_000,
                                        'Actor-step budget of the run.')
_STOP_AT_RETURN = flags.DEFINE_string(
    'stop_at_return', 'auto',
    'Stop once the mean return of the last 100 training episodes reaches this '
    "value; 'auto' uses the environment's solved threshold where known "
    f'({experiment_lib.SOLVED_RETURNS}), "never" runs the whole budget.')
_EVAL_EPISODES = flags.DEFINE_integer('eval_episodes', 20,
                                      'Final evaluation episodes.')
_LOGDIR = flags.DEFINE_string('logdir', '', 'Run directory (default: '
                              'runs/<agent>-<env>-<time>).')
_SEED = flags.DEFINE_integer('seed', 0, 'Base random seed.')
_MAX_RESTARTS = flags.DEFINE_integer(
    'max_restarts', 3, 'How many times a crashed actor, evaluator or '
    'environment worker node is restarted before the program fails.')
_RESTART_LEARNER = flags.DEFINE_bool(
    'restart_learner', False, 'Restart a crashed learner (up to '
    '--max_restarts times) from its latest checkpoint instead of stopping '
    'the program.')
# Groups whose nodes are restarted after a crash (when the program has them).
RESTARTABLE_GROUPS = ('actor', 'evaluator', 'environment')

CONFIG_PREFIX = '--config.'
# Settings a resumed run may change: budgets, evaluation, where it runs.
RESUMABLE_CHANGES = ('experiment.max_actor_steps',
                     'experiment.stop_at_return', 'experiment.eval_episodes',
                     'experiment.launch_type',
                     'experiment.progress_every_seconds')


def config_differences(old: Dict[str, Any], new: Dict[str, Any],
                       prefix: str = '') -> List[str]:
  """'field: old -> new' for each leaf that differs between two configs."""
  differences = []
  for key in sorted(set(old) | set(new)):
    name = f'{prefix}{key}'
    a, b = old.get(key, '<absent>'), new.get(key, '<absent>')
    if isinstance(a, dict) and isinstance(b, dict):
      differences += config_differences(a, b, prefix=f'{name}.')
    elif a != b and name not in RESUMABLE_CHANGES:
      differences.append(f'{name}: {a!r} -> {b!r}')
  return differences


def check_resume(logdir: str, saved: Dict[str, Any]) -> bool:
  """True if `logdir` holds a run to resume; exits if its config differs."""
  path = os.path.join(logdir, 'config.json')
  if not os.path.exists(path):
    return False
  with open(path) as f:
    old = checkpointing.upgrade_saved_config(json.load(f))
  new = json.loads(json.dumps(saved, default=str))
  differences = config_differences(old, new)
  if differences:
    sys.exit(f'repertory.run: error: {logdir} holds a run with a different '
             'config; resume it with the same settings or choose another '
             '--logdir. Differing fields: ' + '; '.join(differences))
  return True


def split_config_overrides(argv: List[str]) -> Tuple[List[str], Dict[str, str]]:
  """Separates `--config.<field>=<value>` arguments from the absl flags."""
  rest, overrides = [], {}
  for arg in argv:
    if not arg.startswith(CONFIG_PREFIX):
      rest.append(arg)
      continue
    name, sep, value = arg[len(CONFIG_PREFIX):].partition('=')
    if not sep or not name:
      raise app.UsageError(
          f'Malformed config override {arg!r}: write --config.<field>=<value>.')
    overrides[name] = value
  return rest, overrides


def _stop_at_return(text: str, env: str):
  if text == 'auto':
    return experiment_lib.SOLVED_RETURNS.get(env)
  if text == 'never':
    return None
  try:
    return float(text)
  except ValueError:
    raise app.UsageError(f'--stop_at_return={text!r}: expected a number, '
                         "'auto' or 'never'.") from None


def _tail(path: str, stop: threading.Event) -> None:
  """Echoes the monitor's progress lines while nodes run in other processes."""
  position = 0
  while not stop.wait(1.0):
    if os.path.exists(path):
      with open(path) as f:
        f.seek(position)
        text = f.read()
        position = f.tell()
      if text:
        sys.stdout.write(text)
        sys.stdout.flush()


def build(config_overrides: Dict[str, str]) -> Tuple[Any, Any, Any]:
  """Validates the flags and builds (config, experiment, program).

  An unknown agent, environment or config field, or a bad value, ends the
  process with one line naming it and the choices, before anything starts.
  """
  try:
    return _build(config_overrides)
  except (ValueError, ImportError) as e:
    sys.exit(f'repertory.run: error: {e}')


def _build(config_overrides: Dict[str, str]) -> Tuple[Any, Any, Any]:
  agent = agents.get(_AGENT.value)
  from repertory import environments  # pylint: disable=g-import-not-at-top
  environments.make(_ENV.value).close()  # An unknown spec fails here, early.
  launch_type = flags.FLAGS.lp_launch_type
  logdir = _LOGDIR.value or os.path.join(
      'runs', f'{_AGENT.value}-{_ENV.value.replace(":", "_").replace("/", "_")}'
      f'-{time.strftime("%Y%m%d-%H%M%S")}')
  config_overrides, checkpoint_overrides = checkpointing.split_overrides(
      config_overrides)
  experiment = experiment_lib.ExperimentConfig(
      agent=_AGENT.value,
      env=_ENV.value,
      num_actors=_NUM_ACTORS.value,
      envs_per_actor=_ENVS_PER_ACTOR.value,
      max_actor_steps=_MAX_ACTOR_STEPS.value,
      stop_at_return=_stop_at_return(_STOP_AT_RETURN.value, _ENV.value),
      eval_episodes=_EVAL_EPISODES.value,
      seed=_SEED.value,
      logdir=os.path.abspath(logdir),
      launch_type=launch_type,
      checkpoint=overrides_lib.apply(checkpointing.CheckpointSettings(),
                                     checkpoint_overrides,
                                     owner='the checkpoint settings'))
  config = overrides_lib.apply(agent.Config(), config_overrides,
                               owner=f'agent {_AGENT.value!r}')
  program = agent.make_program(config, experiment, **remote_flags.program_kwargs(
      _AGENT.value, _ENV.value))  # --env=remote:<spec>: docs/remote.md
  return config, experiment, program


def main(argv: List[str], config_overrides: Dict[str, str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if _MAX_RESTARTS.value < 0:
    sys.exit(f'repertory.run: error: --max_restarts={_MAX_RESTARTS.value} '
             'must be >= 0.')
  config, experiment, program = build(config_overrides)
  saved = {'agent': dataclasses.asdict(config),
           'experiment': dataclasses.asdict(experiment)}
  try:  # The run directory's checks and attempts: see repertory/rundir.py.
    for warning in rundir.preflight(experiment.logdir, saved):
      print(f'repertory.run: warning: {warning}', file=sys.stderr, flush=True)
  except rundir.RunDirError as e:
    sys.exit(f'repertory.run: error: {e}')
  resuming = check_resume(experiment.logdir, saved)
  attempt = rundir.start_attempt(experiment.logdir, saved)
  results_path = os.path.join(experiment.logdir, 'results.json')
  print(f'repertory: {experiment.agent} on {experiment.env}, '
        f'{experiment.num_actors} actors x {experiment.envs_per_actor} envs, '
        f'launch type {experiment.launch_type}; logs in {experiment.logdir}'
        + (' (resuming the run there)' if resuming else ''), flush=True)

  stop_tail = threading.Event()
  if experiment.launch_type in ('local_mp', 'ray'):
    threading.Thread(
        target=_tail, daemon=True,
        args=(os.path.join(experiment.logdir, 'progress.log'), stop_tail)
    ).start()
  groups = [g for g in RESTARTABLE_GROUPS if g in program.groups]
  if _RESTART_LEARNER.value:
    groups.append('learner')
  max_restarts = {g: _MAX_RESTARTS.value for g in groups}
  try:
    launch.launch(program, launch_type=experiment.launch_type,
                  logdir=os.path.join(experiment.logdir, 'nodes'),
                  max_restarts=max_restarts,
                  block=True)  # test_mt too: the results come at the end.
  finally:
    stop_tail.set()
    results = attempt.end()
  if results is None:
    logging.warning('The run ended without writing %s.', results_path)
    sys.exit(1)
  print(json.dumps(results, indent=2, sort_keys=True))


def run() -> None:
  flags.FLAGS.set_default('lp_launch_type', 'local_mp')
  argv, config_overrides = split_config_overrides(sys.argv)
  app.run(lambda argv: main(argv, config_overrides), argv=argv)


if __name__ == '__main__':
  run()
