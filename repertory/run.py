r"""Trains any built-in agent on any environment, in any launch mode.

  python -m repertory.run                       # IMPALA on catch, local_mp
  python -m repertory.run --agent=seed --env=gym:CartPole-v1 \
      --num_actors=4 --config.learning_rate=3e-4 --lp_launch_type=local_mp
  python -m repertory.run --agent=ppo --help    # every flag and PPO's fields

The experiment flags (`--env`, `--num_actors`, `--max_actor_steps`, ...) are
generated from `experiment.ExperimentConfig`, with its defaults and
docstrings; `--config.<field>=<value>` overrides a field of the agent's
`Config` and `--config.checkpoint.<field>` the checkpoint settings every
agent shares (one `ml_collections` flag, `repertory.overrides`). Unknown
agents, environments and fields are refused before anything starts. The
run itself is `experiment.run_experiment`, as from Python. At the end
`<logdir>/results.json` holds the run's figures (and
`<logdir>/attempts/<n>/results.json` those of each attempt; see
docs/checkpoints.md).

Rerunning the same command with the same `--logdir` resumes the run (the
learner from its latest checkpoint, counters, replay and logs where they
were); a rerun whose settings differ from `<logdir>/config.json` is refused
with the differing fields named (only the fields in
`rundir.RESUMABLE_CHANGES` may change), and a damaged part of the run
directory is named in one line before any node starts (`repertory.rundir`).
Rerunning a finished run is refused unless `--max_actor_steps` is raised
above the steps it took.

A script of one's own gets the same command line with `run.run()` (after
e.g. `agents.register(...)` and `flags.FLAGS.set_default('agent', ...)`).
"""

import dataclasses
import functools
import json
import os
# TensorFlow's INFO banner at import is not the run's output (an error stays
# one line on stderr); its warnings and errors still show.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
from absl import logging

from repertory import agents
from repertory import experiment as experiment_lib
from repertory import launch
from repertory import league_flags
from repertory import overrides as overrides_lib
from repertory import placement
from repertory import rundir
from repertory.components import checkpointing
from repertory.launch.api import errors as launch_errors
from repertory.launch.process import startup_gc
from repertory.remote import flags as remote_flags
from repertory.remote import program as remote_program

# ExperimentConfig fields that are not experiment flags: the launch type is
# --lp_launch_type (repertory.launch's flag), the checkpoint settings are
# --config.checkpoint.<field>.
NOT_FLAGS = ('launch_type', 'checkpoint')
# Help beyond the dataclass's docstring.
_EXTRA_HELP = {
    'agent': f'One of: {", ".join(sorted(agents.AGENTS))}.',
    'logdir': "Empty: runs/<agent>-<env>-<time>.",
}
HELP_REQUESTS = ('--help', '-h', '--helpshort', '-?')
# Flags of earlier versions that no longer exist: name -> what replaced it.
RENAMED_FLAGS: Dict[str, str] = {
    'selfplay': 'use --league=<rule> with --agent=impala|seed|ppo|... '
                '(docs/selfplay.md).'}


def _define_experiment_flags() -> Dict[str, Any]:
  """One absl flag per `ExperimentConfig` field, with its default and doc."""
  docs = overrides_lib.field_docs(experiment_lib.ExperimentConfig)
  holders = {}
  for field in dataclasses.fields(experiment_lib.ExperimentConfig):
    if field.name in NOT_FLAGS:
      continue
    default = field.default
    text = ' '.join(filter(None, (docs.get(field.name, ''),
                                  _EXTRA_HELP.get(field.name))))
    define = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
              float: flags.DEFINE_float}.get(type(default), flags.DEFINE_string)
    holders[field.name] = define(field.name, default, text)
  return holders


_EXPERIMENT_FLAGS = _define_experiment_flags()
_SEEDS = flags.DEFINE_integer(
    'seeds', 1, 'Run this many seeds (--seed, --seed + 1, ...), each a '
    'separate program in <logdir>/<grid point>/seed<N>, and print a results '
    'table across them (repertory.sweep).')
_GRID = flags.DEFINE_multi_string(
    'grid', [], 'A sweep over a flag: --grid=<flag>=<v1>,<v2>,... (e.g. '
    '--grid=config.learning_rate=1e-3,3e-3); repeat for a grid.')
_SWEEP_CONCURRENCY = flags.DEFINE_integer(
    'sweep_concurrency', 1, 'Trials of a sweep run at once under '
    '--lp_launch_type=ray (Ray Tune); locally they run one after another.')
_BSUITE_SWEEP = flags.DEFINE_string(
    'bsuite_sweep', None, "Run every setting of a bsuite experiment's sweep "
    "('memory_len': bsuite:memory_len/0, /1, ...; or ids of it, "
    "'memory_len/0,memory_len/4'), each for the sweep's NUM_EPISODES "
    'episodes (the steps they take), in <logdir>/<experiment>-<n>/seed<N>; '
    "rerun to resume. The results page scores it with bsuite's analysis "
    '(docs/r2d2-apex.md).')
_BSUITE_EPISODES = flags.DEFINE_integer(
    'bsuite_episodes', None, 'With --bsuite_sweep: episodes of each setting '
    "instead of bsuite's NUM_EPISODES (a short check).", lower_bound=1)
# The flags `--help` shows (with --config.*); --helpfull shows every flag.
SHARED_FLAGS = (*_EXPERIMENT_FLAGS, 'seeds', 'grid', 'sweep_concurrency',
                'bsuite_sweep', 'bsuite_episodes', *league_flags.NAMES,
                'lp_launch_type',
                'ray_address', 'lp_resources', 'lp_termination_notice_secs')



def _error(message: Any) -> None:
  sys.exit(f'repertory.run: error: {message}')


def build() -> Tuple[Any, Any, Any]:
  """Validates the parsed flags and builds (config, experiment, program),
  the program placed as it will run (`placement.place`).

  An unknown agent, environment or config field, or a bad value, ends the
  process with one line naming it and the choices, before anything starts.
  """
  try:
    return _build()
  except (ValueError, ImportError, TypeError, launch.LaunchError) as e:
    _error(e)


def experiment_from_flags(checkpoint: checkpointing.CheckpointSettings
                          ) -> experiment_lib.ExperimentConfig:
  """The `ExperimentConfig` the command line describes."""
  values = {name: holder.value for name, holder in _EXPERIMENT_FLAGS.items()}
  values['launch_type'] = flags.FLAGS.lp_launch_type
  if not values['logdir']:
    env = str(values['env']).replace(':', '_').replace('/', '_')
    values['logdir'] = os.path.join(
        'runs', f'{values["agent"]}-{env}-{time.strftime("%Y%m%d-%H%M%S")}')
  values['logdir'] = os.path.abspath(values['logdir'])
  return experiment_lib.ExperimentConfig(**values, checkpoint=checkpoint)


def configs_from_flags() -> Tuple[Any, experiment_lib.ExperimentConfig]:
  """(the agent's `Config`, the `ExperimentConfig`) of the parsed flags."""
  agent = agents.get(flags.FLAGS.agent)
  config, checkpoint = overrides_lib.configs_from_flag(
      flags.FLAGS.config, agent.Config, owner=f'agent {flags.FLAGS.agent!r}')
  return config, experiment_from_flags(checkpoint)


def _build() -> Tuple[Any, Any, Any]:
  agent = agents.get(flags.FLAGS.agent)
  from repertory import environments  # pylint: disable=g-import-not-at-top
  environments.make(flags.FLAGS.env).close()  # An unknown spec fails here.
  config, experiment = configs_from_flags()
  # Self-play (--league): the agent's program in a league.
  make_program = league_flags.in_league(agent.make_program)
  if remote_program.is_remote(experiment.env):  # docs/remote.md
    make_program = functools.partial(remote_program.make_program,
                                     make_program,
                                     options=remote_flags.options())
  program = make_program(config, experiment)
  resources = launch.parse_resources(flags.FLAGS.lp_resources or '')
  if resources:  # Refused here, before the run directory.
    launch.check_resources(program, resources, experiment.launch_type)
  if experiment.launch_type == 'ray':  # No cluster, no token, no resource.
    launch.check_cluster(resources, flags.FLAGS.ray_address)
  return config, experiment, placement.place(program, experiment)


def main(command: Sequence[str]) -> None:
  """Runs the parsed command line (`command`: as given, for the attempt
  record, the resume hint and a sweep's trials)."""
  if _SEEDS.value > 1 or _GRID.value or _BSUITE_SWEEP.value:
    return run_sweep_from_flags(command)
  if _BSUITE_EPISODES.value:
    _error('--bsuite_episodes needs --bsuite_sweep=<experiment>.')
  config, experiment, program = build()
  try:
    result = experiment_lib.run_experiment(config, experiment, program,
                                           argv=list(command))
  except rundir.RunDirError as e:  # Before anything started.
    _error(e)
  except KeyboardInterrupt as e:
    # Stopped, with its checkpoints: the status a shell gives a command its
    # signal ended (130 for Ctrl-C, 143 for SIGTERM), not a failure's 1.
    print(interrupted_message(experiment.logdir, command), file=sys.stderr)
    sys.exit(e.code if isinstance(e, launch.Terminated) else
             128 + signal.SIGINT)
  except launch.NodeError as e:  # One line; the traceback is in the node log.
    _error(launch_errors.one_line(e))
  except launch.LaunchError as e:  # E.g. no Ray cluster at --ray_address.
    _error(e)
  except RuntimeError as e:
    logging.warning('%s', e)
    sys.exit(1)
  print(json.dumps(result.results, indent=2, sort_keys=True))


def _program_command(command: Sequence[str]) -> List[str]:
  """How to run `command`'s program again: this module, or the script that
  called `run.run()`."""
  main_file = os.path.abspath(command[0]) if command else ''
  if not main_file or main_file.endswith(os.path.join('repertory', 'run.py')):
    return [sys.executable, '-m', 'repertory.run']
  return [sys.executable, main_file]


def interrupted_message(logdir: str, command: Sequence[str]) -> str:
  """What Ctrl-C prints: where the checkpoint is and how to resume."""
  args = [flag for flag in given_flags() if not flag.startswith('--logdir=')]
  program = _program_command(command)
  line = rundir.command_line([program[-1] if program[1] != '-m' else '',
                              *args, f'--logdir={logdir}'])
  return (f'Stopped. Checkpoints are in {os.path.join(logdir, "checkpoints")}'
          f' (counts in {os.path.join(logdir, "counts.json")}). Resume with:\n'
          f'  {line}')


def given_flags(skip: Sequence[str] = ()) -> List[str]:
  """The flags the command line set, as `--name=value` (from the parsed
  flags, not the text), without those named in `skip`."""
  out = []
  for name in flags.FLAGS:
    flag = flags.FLAGS[name]
    if (flag.name != name or not flag.present or name in skip or
        name == 'config'):
      continue
    if name.startswith('config.'):
      out.append(f'--{name}={overrides_lib.to_text(flag.value)}')
    elif isinstance(flag, flags.MultiFlag):
      out += [f'--{name}={v}' for v in flag.value]
    elif isinstance(flag.value, bool):
      out.append(f'--{name}' if flag.value else f'--no{name}')
    else:
      out.append(flag.serialize())
  return out


def run_sweep_from_flags(command: Sequence[str]) -> None:
  """`--seeds` / `--grid` / `--bsuite_sweep`: each trial a separate program
  (repertory.sweep)."""
  from repertory import sweep  # pylint: disable=g-import-not-at-top
  startup_gc.resume()  # This process starts no program; the trials do.
  try:
    grid = sweep.parse_grid(_GRID.value)
    points = _bsuite_points() if _BSUITE_SWEEP.value else None
  except ValueError as e:
    _error(e)
  _, experiment, _ = build()  # Refuses bad flags before the first trial.
  logdir = experiment.logdir
  try:
    table = sweep.run_sweep(
        given_flags(skip=sweep.SWEEP_FLAGS), _program_command(command),
        seeds=_SEEDS.value, grid=grid, logdir=logdir,
        base_seed=flags.FLAGS.seed,
        use_tune=flags.FLAGS.lp_launch_type == 'ray',
        concurrency=_SWEEP_CONCURRENCY.value,
        ray_address=flags.FLAGS.ray_address, points=points,
        command=rundir.command_line(command),
        max_actor_steps=experiment.max_actor_steps)
  except launch.LaunchError as e:  # E.g. no Ray cluster at --ray_address.
    _error(e)
  print(table.to_string(index=False))
  print(sweep.summary_text(table))
  print(f'repertory.sweep: table in {os.path.join(logdir, "sweep.csv")}; '
        f'curves: python -m repertory.plot {logdir}')
  if points:
    print(f'bsuite scores: python -m repertory.results {logdir} '
          '--out=<page>.md')


def _bsuite_points() -> List[Tuple[str, Dict[str, str]]]:
  """The trials of `--bsuite_sweep`; the preflight checks its first
  setting's environment."""
  from repertory.results import bsuite  # pylint: disable=g-import-not-at-top
  for name in ('env', 'max_actor_steps', 'stop_at_return', 'grid'):
    if flags.FLAGS[name].present:
      raise ValueError(f'--{name} with --bsuite_sweep: the sweep sets the '
                       'environment and the budget of each setting.')
  if not flags.FLAGS.logdir:
    raise ValueError('--bsuite_sweep needs --logdir=<dir> (a rerun with the '
                     'same --logdir resumes the sweep).')
  points = bsuite.sweep_points(_BSUITE_SWEEP.value, _BSUITE_EPISODES.value)
  flags.FLAGS.env = points[0][1]['env']
  return points


def usage(agent_name: str) -> str:
  """What `--help` prints: this module's doc, the shared flags, the agent's
  fields and the checkpoint fields, with their defaults and docs."""
  lines = [(sys.modules[__name__].__doc__ or '').strip(), '', 'Flags:']
  for name in SHARED_FLAGS:
    if name in flags.FLAGS:
      flag = flags.FLAGS[name]
      lines.append(f'  --{name}: {flag.help} (default: {flag.default!r})')
  lines += ['', f'--config.<field> of agent {agent_name!r}:',
            overrides_lib.describe(agents.get(agent_name).Config()),
            '', '--config.checkpoint.<field> (every agent):',
            overrides_lib.describe(checkpointing.CheckpointSettings(),
                                   prefix='checkpoint.'),
            '', 'Every flag: --helpfull.']
  return '\n'.join(lines)


def parse_command_line(argv: Sequence[str]) -> Optional[List[str]]:
  """Parses `argv` into `flags.FLAGS`: first the flags defined so far
  (to learn the agent), then, with `--config` defined for that agent's
  `Config`, all of them. Returns the command line as given (None if it
  asked for help, which is printed); a bad flag ends the process with one
  line."""
  argv = list(argv)
  try:
    rest = flags.FLAGS(argv, known_only=True)
    for arg in rest[1:]:  # What absl did not know: a flag of old?
      name = arg[2:].split('=', 1)[0] if arg.startswith('--') else None
      if name in RENAMED_FLAGS:
        _error(f'--{name} was replaced: {RENAMED_FLAGS[name]}')
    rewritten = argv
    agent = agents.get(flags.FLAGS.agent)
    if 'config' not in flags.FLAGS:
      overrides_lib.define_config_flag(agent.Config(), rewritten,
                                       owner=f'agent {flags.FLAGS.agent!r}')
  except (flags.Error, ValueError, ImportError) as e:
    _error(e)
  if '--helpfull' in rest[1:]:
    print(flags.FLAGS.get_help())
    return None
  if any(arg in HELP_REQUESTS for arg in rest[1:]):
    print(usage(flags.FLAGS.agent))
    return None
  flags.FLAGS.unparse_flags()
  try:
    flags.FLAGS(rewritten)
  except (flags.Error, ValueError) as e:
    _error(e)
  return argv


def run(argv: Optional[List[str]] = None) -> None:
  """The command line of `python -m repertory.run`, for this or any script
  (`--help` shows the shared flags and the chosen agent's fields)."""
  # A process that runs one program: no collector passes over the imports
  # until the program is up (repertory/launch/process/startup_gc.py).
  startup_gc.pause()
  if flags.FLAGS['lp_launch_type'].default == 'local_mt':
    flags.FLAGS.set_default('lp_launch_type', 'local_mp')
  command = parse_command_line(sys.argv if argv is None else argv)
  if command is None:
    return
  app.run(lambda _: main(command), argv=command[:1],
          flags_parser=lambda args: args)


if __name__ == '__main__':
  run()
