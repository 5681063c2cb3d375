r"""Trains any built-in agent on any environment, in any launch mode.

  python -m repertory.run                       # IMPALA on catch, local_mp
  python -m repertory.run --agent=seed --env=gym:CartPole-v1 \
      --num_actors=4 --config.learning_rate=3e-4 --lp_launch_type=local_mp
  python -m repertory.run --agent=ppo --help    # every flag and PPO's fields

The experiment flags (`--env`, `--num_actors`, `--max_actor_steps`, ...) are
generated from `experiment.ExperimentConfig`, with its defaults and
docstrings; `--config.<field>=<value>` overrides a field of the agent's
`Config` (`ml_collections.config_flags`) and `--config.checkpoint.<field>`
the checkpoint settings every agent shares. Unknown agents, environments
and fields are refused before anything starts. At the end
`<logdir>/results.json` holds the run's figures (and
`<logdir>/attempts/<n>/results.json` those of each attempt; see
docs/checkpoints.md).

Rerunning the same command with the same `--logdir` resumes the run (the
learner from its latest checkpoint, counters, replay and logs where they
were); a rerun whose settings differ from `<logdir>/config.json` is refused
with the differing fields named (only the fields in `RESUMABLE_CHANGES` may
change). Rerunning a finished run is refused unless `--max_actor_steps` is
raised above the steps it took.

A script of one's own gets the same command line with `run.run()` (after
e.g. `agents.register(...)` and `flags.FLAGS.set_default('agent', ...)`).
"""

import dataclasses
import json
import os
# TensorFlow's INFO banner at import is not the run's output (an error stays
# one line on stderr); its warnings and errors still show.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')
import signal
import sys
import threading
import time
import typing
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from repertory import agents
from repertory import experiment as experiment_lib
from repertory import launch
from repertory import overrides as overrides_lib
from repertory import rundir
from repertory.agents.selfplay import variants as selfplay_variants
from repertory.components import checkpointing
from repertory.launch.api import errors as launch_errors
from repertory.launch.process import startup_gc
from repertory.remote import flags as remote_flags

# ExperimentConfig fields that are not experiment flags: the launch type is
# --lp_launch_type (repertory.launch's flag), the checkpoint settings are
# --config.checkpoint.<field> (components.checkpointing).
NOT_FLAGS = ('launch_type', 'checkpoint')
# Help beyond the dataclass's docstring.
_EXTRA_HELP = {
    'agent': f'One of: {", ".join(sorted(agents.AGENTS))}.',
    'logdir': "Empty: runs/<agent>-<env>-<time>.",
}
# Flags of earlier versions that no longer exist: name -> what replaced it.
RENAMED_FLAGS: Dict[str, str] = {}


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
_MAX_RESTARTS = flags.DEFINE_integer(
    'max_restarts', 3, 'How many times a crashed actor, evaluator or '
    'environment worker node is restarted before the program fails.')
_RESTART_LEARNER = flags.DEFINE_bool(
    'restart_learner', False, 'Restart a crashed learner (up to '
    '--max_restarts times) from its latest checkpoint instead of stopping '
    'the program.')
_SEEDS = flags.DEFINE_integer(
    'seeds', 1, 'Run this many seeds (--seed, --seed + 1, ...), each a '
    'separate program in <logdir>/<grid point>/seed<N>, and print a results '
    'table across them (repertory.sweep).')
_GRID = flags.DEFINE_multi_string(
    'grid', [], 'A sweep over a flag: --grid=<flag>=<v1>,<v2>,... (e.g. '
    '--grid=config.learning_rate=1e-3,3e-3); repeat for a grid.')
_SHARE_PROCESSES = flags.DEFINE_bool(
    'share_processes', True, 'local_mp: run the replay, counter, monitor and '
    "evaluator nodes in the learner's process (with --restart_learner: the "
    "counter and evaluator in the monitor's), instead of one process each; "
    'see docs/performance.md.')
_ACTOR_PROCESSES = flags.DEFINE_integer(
    'actor_processes', 0, 'local_mp: run the actors in at most this many '
    'processes, as threads of them (0: one process per CPU core beyond '
    "the first, which the learner's process keeps; with "
    '--noshare_processes, one per actor); ray: the same when set (0: one '
    'per actor); see docs/performance.md.')
_SWEEP_CONCURRENCY = flags.DEFINE_integer(
    'sweep_concurrency', 1, 'Trials of a sweep run at once under '
    '--lp_launch_type=ray (Ray Tune); locally they run one after another.')
flags.DEFINE_string(  # Read by selfplay_variants.rewrite_argv in run().
    'selfplay', '', 'Self-play of --agent=impala|seed|ppo on an N-player game: '
    'latest|uniform|pfsp|pfsp_variance|alphastar (docs/selfplay.md).')
# The flags `--help` shows (with --config.*); --helpfull shows every flag.
SHARED_FLAGS = (*_EXPERIMENT_FLAGS, 'max_restarts', 'restart_learner',
                'seeds', 'grid', 'sweep_concurrency', 'selfplay',
                'share_processes', 'actor_processes',
                'lp_launch_type', 'ray_address', 'lp_resources',
                'lp_termination_notice_secs')
# Groups whose nodes are restarted after a crash (when the program has them).
RESTARTABLE_GROUPS = ('actor', 'evaluator', 'environment')

CONFIG_PREFIX = '--config.'
# Settings a resumed run may change: budgets, evaluation, where it runs.
RESUMABLE_CHANGES = ('experiment.max_actor_steps',
                     'experiment.stop_at_return',
                     'experiment.stop_evaluations', 'experiment.eval_episodes',
                     'experiment.eval_every_steps',
                     'experiment.eval_every_seconds',
                     'experiment.final_eval_episodes',
                     'experiment.eval_fraction',
                     'experiment.launch_type',
                     'experiment.progress_every_seconds')


def config_differences(old: Dict[str, Any], new: Dict[str, Any],
                       prefix: str = '',
                       defaults: Optional[Dict[str, Any]] = None) -> List[str]:
  """'field: old -> new' for each leaf that differs between two configs.

  A field the old config lacks (added to the code since that run) whose new
  value is its default in `defaults` (nested like the configs) is no
  difference: the run trained with that behaviour.
  """
  defaults = defaults or {}
  differences = []
  for key in sorted(set(old) | set(new)):
    name = f'{prefix}{key}'
    a, b = old.get(key, '<absent>'), new.get(key, '<absent>')
    if isinstance(a, dict) and isinstance(b, dict):
      sub_defaults = defaults.get(key)
      differences += config_differences(
          a, b, prefix=f'{name}.',
          defaults=sub_defaults if isinstance(sub_defaults, dict) else None)
    elif key not in old and key in defaults and b == defaults[key]:
      continue
    elif a != b and name not in RESUMABLE_CHANGES:
      differences.append(f'{name}: {a!r} -> {b!r}')
  return differences


def _as_saved(config: Dict[str, Any]) -> Dict[str, Any]:
  """A config as `config.json` holds it (tuples as lists, etc.)."""
  return checkpointing.upgrade_saved_config(
      json.loads(json.dumps(config, default=str)))


def _default_config(config: Any) -> Dict[str, Any]:
  """The defaults of `config`'s dataclass: all of them if it builds without
  arguments (its `__post_init__` applied), else those of the fields that
  have one."""
  try:
    return dataclasses.asdict(type(config)())
  except (TypeError, ValueError):
    pass
  defaults = {}
  for field in dataclasses.fields(config):
    if field.default is not dataclasses.MISSING:
      value = field.default
    elif field.default_factory is not dataclasses.MISSING:
      value = field.default_factory()
    else:
      continue
    defaults[field.name] = (dataclasses.asdict(value)
                            if dataclasses.is_dataclass(value) else value)
  return defaults


def check_resume(logdir: str, saved: Dict[str, Any],
                 agent_defaults: Optional[Dict[str, Any]] = None,
                 experiment_defaults: Optional[Dict[str, Any]] = None,
                 agent_former_defaults: Optional[Dict[str, Any]] = None
                 ) -> bool:
  """True if `logdir` holds a run to resume; exits if its config differs.

  `agent_defaults`, `experiment_defaults`: the defaults of the two configs'
  fields (`_default_config`), so a field added since the run was started,
  left at its default, resumes. `agent_former_defaults`: fields added with
  a default other than what runs did before them (the agent config's
  `FORMER_DEFAULTS`): a saved config without one is compared as having
  that value.
  """
  path = os.path.join(logdir, 'config.json')
  if not os.path.exists(path):
    return False
  with open(path) as f:
    old = checkpointing.upgrade_saved_config(json.load(f))
  if agent_former_defaults:
    old['agent'] = {**_as_saved(agent_former_defaults),
                    **(old.get('agent') or {})}
  # Upgraded like the saved one, so an agent field that shares a legacy name
  # (selfplay's checkpoint_every_steps) compares equal to itself.
  new = _as_saved(saved)
  defaults = _as_saved({'agent': agent_defaults or {},
                        'experiment': experiment_defaults or {}})
  differences = config_differences(old, new, defaults=defaults)
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


def build(config_overrides: Optional[Dict[str, str]] = None
          ) -> Tuple[Any, Any, Any]:
  """Validates the flags and builds (config, experiment, program).

  An unknown agent, environment or config field, or a bad value, ends the
  process with one line naming it and the choices, before anything starts.
  """
  try:
    return _build(config_overrides or {})
  except (ValueError, ImportError, TypeError, launch.LaunchError) as e:
    sys.exit(f'repertory.run: error: {e}')


def experiment_from_flags() -> experiment_lib.ExperimentConfig:
  """The `ExperimentConfig` the command line describes."""
  values = {name: holder.value for name, holder in _EXPERIMENT_FLAGS.items()}
  values['launch_type'] = flags.FLAGS.lp_launch_type
  if not values['logdir']:
    env = str(values['env']).replace(':', '_').replace('/', '_')
    values['logdir'] = os.path.join(
        'runs', f'{values["agent"]}-{env}-{time.strftime("%Y%m%d-%H%M%S")}')
  values['logdir'] = os.path.abspath(values['logdir'])
  values['checkpoint'] = overrides_lib.apply(
      checkpointing.CheckpointSettings(), _CHECKPOINT_OVERRIDES,
      owner='the checkpoint settings')
  return experiment_lib.ExperimentConfig(**values)


def agent_config_from_flags(agent: Any,
                            config_overrides: Dict[str, str]) -> Any:
  """The agent's `Config`: `--config.*` (when `run()` defined the flag for
  this agent), then `config_overrides`; validated by its `__post_init__`."""
  config = agent.Config()
  if 'config' in flags.FLAGS and isinstance(flags.FLAGS.config, agent.Config):
    config = flags.FLAGS.config
  overrides = dict(_CONFIG_NONES)
  overrides.update(config_overrides)
  owner = f'agent {flags.FLAGS.agent!r}'
  return overrides_lib.apply(config, overrides, owner=owner)  # Validates.


def _build(config_overrides: Dict[str, str]) -> Tuple[Any, Any, Any]:
  agent = agents.get(flags.FLAGS.agent)
  from repertory import environments  # pylint: disable=g-import-not-at-top
  environments.make(flags.FLAGS.env).close()  # An unknown spec fails here.
  config_overrides, checkpoint = checkpointing.split_overrides(
      config_overrides)
  _CHECKPOINT_OVERRIDES.update(checkpoint)
  experiment = experiment_from_flags()
  config = agent_config_from_flags(agent, config_overrides)
  program = agent.make_program(config, experiment, **remote_flags.program_kwargs(
      experiment.agent, experiment.env))  # --env=remote:<spec>: docs/remote.md
  resources = launch.parse_resources(flags.FLAGS.lp_resources or '')
  if resources:  # Refused here, before the run directory.
    launch.check_resources(program, resources, experiment.launch_type)
  if experiment.launch_type == 'ray':  # No cluster, no token, no resource.
    launch.check_cluster(resources, flags.FLAGS.ray_address)
  if _SHARE_PROCESSES.value and experiment.launch_type in ('local_mp',
                                                           'test_mp'):
    share_processes(program, restart_learner=_RESTART_LEARNER.value)
  if experiment.launch_type in ('local_mp', 'test_mp') and (
      _SHARE_PROCESSES.value or _ACTOR_PROCESSES.value):
    program.spread_group('actor', actor_processes(_ACTOR_PROCESSES.value))
  elif experiment.launch_type == 'ray' and _ACTOR_PROCESSES.value:
    program.spread_group('actor', _ACTOR_PROCESSES.value)
  return config, experiment, program


# Groups that share one process in local_mp (`--share_processes`): the
# first names the process. The learner needs TensorFlow, the replay node's
# Reverb server links it, the monitor's Reverb client (table sizes) and the
# evaluations import it; the counter, monitor and evaluator are light (a few
# calls a second, an evaluation now and then), so in the learner's process
# they cost a thread each instead of a process with TensorFlow. A node of
# another group that raises is restarted in its thread (`--max_restarts`).
# With --restart_learner the learner keeps its own process (restarting it
# would take the others with it).
SHARED_PROCESSES = ('learner', 'replay', 'monitor', 'counter', 'evaluator')
SHARED_PROCESSES_RESTARTABLE_LEARNER = ('monitor', 'counter', 'evaluator')


def share_processes(program: Any, restart_learner: bool = False) -> None:
  """Colocates the groups of `SHARED_PROCESSES` in `program`
  (`launch.Program.share_process`)."""
  program.share_process(*(SHARED_PROCESSES_RESTARTABLE_LEARNER
                          if restart_learner else SHARED_PROCESSES))


def actor_processes(requested: int, cores: Optional[int] = None) -> int:
  """How many processes local_mp's actors run in: `requested`, or for 0
  one per core beyond the first (at least one). Actors that only step
  environments and write to Reverb are light on memory but not on CPU: on
  2 cores, two actor processes beside the learner's take CPU from each
  other and from the learner while each costs a Python interpreter."""
  if requested:
    return requested
  return max(1, (cores or os.cpu_count() or 1) - 1)


def main(argv: List[str],
         config_overrides: Optional[Dict[str, str]] = None) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if _ACTOR_PROCESSES.value < 0:
    sys.exit(f'repertory.run: error: --actor_processes='
             f'{_ACTOR_PROCESSES.value} must be >= 0 (0: one per CPU core '
             'beyond the first).')
  if _MAX_RESTARTS.value < 0:
    sys.exit(f'repertory.run: error: --max_restarts={_MAX_RESTARTS.value} '
             'must be >= 0.')
  if _SEEDS.value > 1 or _GRID.value:
    return run_sweep_from_flags()
  config, experiment, program = build(config_overrides)
  saved = {'agent': dataclasses.asdict(config),
           'experiment': dataclasses.asdict(experiment)}
  try:  # The run directory's checks and attempts: see repertory/rundir.py.
    actor_units = sum(u.label == 'actor' for u in program.units)
    for warning in rundir.preflight(experiment.logdir, saved,
                                    actor_processes=actor_units or None):
      print(f'repertory.run: warning: {warning}', file=sys.stderr, flush=True)
  except rundir.RunDirError as e:
    sys.exit(f'repertory.run: error: {e}')
  resuming = check_resume(experiment.logdir, saved,
                          agent_defaults=_default_config(config),
                          experiment_defaults=_default_config(experiment),
                          agent_former_defaults=getattr(
                              config, 'FORMER_DEFAULTS', None))
  attempt = rundir.start_attempt(experiment.logdir, saved)
  results_path = os.path.join(experiment.logdir, 'results.json')
  print(f'repertory: {experiment.agent} on {experiment.env}, '
        f'{experiment.num_actors} actors x {experiment.envs_per_actor} envs, '
        f'launch type {experiment.launch_type}; logs in {experiment.logdir}'
        + (' (resuming the run there)' if resuming else ''), flush=True)
  groups = [g for g in RESTARTABLE_GROUPS if g in program.groups]
  if _RESTART_LEARNER.value:
    groups.append('learner')
  max_restarts = {g: _MAX_RESTARTS.value for g in groups}
  try:
    try:
      result = experiment_lib.run_experiment(
          config, experiment, program, max_restarts, write_config=False)
    finally:
      results = attempt.end()  # This attempt's record (repertory/rundir.py).
  except KeyboardInterrupt as e:
    # Stopped, with its checkpoints: the status a shell gives a command its
    # signal ended (130 for Ctrl-C, 143 for SIGTERM), not a failure's 1.
    print(interrupted_message(experiment.logdir), file=sys.stderr)
    sys.exit(e.code if isinstance(e, launch.Terminated) else
             128 + signal.SIGINT)
  except launch.NodeError as e:  # One line; the traceback is in the node log.
    sys.exit(f'repertory.run: error: {launch_errors.one_line(e)}')
  except launch.LaunchError as e:  # E.g. no Ray cluster at --ray_address.
    sys.exit(f'repertory.run: error: {e}')
  except RuntimeError as e:
    logging.warning('%s', e)
    sys.exit(1)
  print(json.dumps(results if results is not None else result.results,
                   indent=2, sort_keys=True))


def interrupted_message(logdir: str) -> str:
  """What Ctrl-C prints: where the checkpoint is and how to resume."""
  args = [a for a in (_ORIGINAL_ARGV[1:] if _ORIGINAL_ARGV else sys.argv[1:])
          if not a.startswith('--logdir')]
  main_file = os.path.abspath(_ORIGINAL_ARGV[0]) if _ORIGINAL_ARGV else ''
  command = rundir.command_line([main_file, *args, f'--logdir={logdir}'])
  return (f'Stopped. Checkpoints are in {os.path.join(logdir, "checkpoints")}'
          f' (counts in {os.path.join(logdir, "counts.json")}). Resume with:\n'
          f'  {command}')


def run_sweep_from_flags() -> None:
  """`--seeds` / `--grid`: each trial a separate program (repertory.sweep)."""
  from repertory import sweep  # pylint: disable=g-import-not-at-top
  startup_gc.resume()  # This process starts no program; the trials do.
  try:
    grid = sweep.parse_grid(_GRID.value)
  except ValueError as e:
    sys.exit(f'repertory.run: error: {e}')
  build()  # Refuses bad flags before the first trial starts.
  logdir = experiment_from_flags().logdir
  main_file = os.path.abspath(_ORIGINAL_ARGV[0]) if _ORIGINAL_ARGV else ''
  if not main_file or main_file.endswith(
      os.path.join('repertory', 'run.py')):
    program = [sys.executable, '-m', 'repertory.run']
  else:  # A script built on run.run(): its trials run the script.
    program = [sys.executable, main_file]
  try:
    table = sweep.run_sweep(
        _ORIGINAL_ARGV[1:], program, seeds=_SEEDS.value, grid=grid,
        logdir=logdir, base_seed=flags.FLAGS.seed,
        use_tune=flags.FLAGS.lp_launch_type == 'ray',
        concurrency=_SWEEP_CONCURRENCY.value,
        ray_address=flags.FLAGS.ray_address)
  except launch.LaunchError as e:  # E.g. no Ray cluster at --ray_address.
    sys.exit(f'repertory.run: error: {e}')
  print(table.to_string(index=False))
  print(f'repertory.sweep: table in {os.path.join(logdir, "sweep.csv")}; '
        f'curves: python -m repertory.plot {logdir}')


# The command line as given (before `--config.<field>=none` was taken out).
_ORIGINAL_ARGV: List[str] = []
# `--config.<field>=none` of Optional fields (ml_collections cannot parse
# them); applied after the flag.
_CONFIG_NONES: Dict[str, str] = {}
# `--config.checkpoint.<field>=...` (and the former agent field names):
# the experiment's `CheckpointSettings`, not the agent's `Config`.
_CHECKPOINT_OVERRIDES: Dict[str, str] = {}


def _argv_value(argv: Sequence[str], name: str, default: Any) -> Any:
  """The value of `--name=value` / `--name value` in `argv` (the last one)."""
  value = default
  for i, arg in enumerate(argv):
    if arg.startswith(f'--{name}='):
      value = arg.split('=', 1)[1]
    elif arg == f'--{name}' and i + 1 < len(argv):
      value = argv[i + 1]
  return value


def define_config_flag(agent_name: str, argv: Sequence[str]) -> List[str]:
  """Defines `--config` (ml_collections) for the agent's `Config`; returns
  `argv` without the `--config.<field>=none` arguments it cannot parse.

  Exits with one line for an unknown agent or config field.
  """
  try:
    agent = agents.get(agent_name)
  except (ValueError, ImportError) as e:
    sys.exit(f'repertory.run: error: {e}')
  config = agent.Config()
  hints = typing.get_type_hints(type(config))
  fields = sorted(f.name for f in dataclasses.fields(config) if f.init)
  kept, given = [], {}
  for arg in argv:
    if arg.startswith(CONFIG_PREFIX):
      name, sep, value = arg[len(CONFIG_PREFIX):].partition('=')
      if not sep or not name:
        sys.exit(f'repertory.run: error: Malformed config override {arg!r}: '
                 'write --config.<field>=<value>.')
      _, checkpoint = checkpointing.split_overrides({name: value})
      if checkpoint:
        _CHECKPOINT_OVERRIDES.update(checkpoint)
        continue
      if name not in fields:
        sys.exit(f'repertory.run: error: Unknown config field {name!r} for '
                 f'agent {agent_name!r}; known fields: {", ".join(fields)}. '
                 f'See: python -m repertory.run --agent={agent_name} --help')
      given[name] = value
      if value.lower() == 'none' and type(None) in typing.get_args(
          hints[name]):
        _CONFIG_NONES[name] = value
        continue
    kept.append(arg)
  try:  # One clear line for a value of the wrong type, or values that do
    # not go together (checked together: each alone may not be valid).
    overrides_lib.apply(config, given, owner=f'agent {agent_name!r}')
  except ValueError as e:
    sys.exit(f'repertory.run: error: {e}')
  if 'config' not in flags.FLAGS:
    config_flags.DEFINE_config_dataclass(
        'config', config, f"Fields of agent {agent_name!r}'s Config: "
        '--config.<field>=<value>.', sys_argv=kept)
  return kept


def usage(agent_name: str) -> str:
  """What `--help` prints: this module's doc, the shared flags, the agent's
  fields with their defaults and docs."""
  lines = [(sys.modules[__name__].__doc__ or '').strip(), '', 'Flags:']
  for name in SHARED_FLAGS:
    if name in flags.FLAGS:
      flag = flags.FLAGS[name]
      lines.append(f'  --{name}: {flag.help} (default: {flag.default!r})')
  lines += ['', f'--config.<field> of agent {agent_name!r}:',
            overrides_lib.describe(agents.get(agent_name).Config()),
            '', 'Every flag: --helpfull.']
  return '\n'.join(lines)


def _parse_flags(argv: List[str]) -> List[str]:
  for arg in argv[1:]:
    name = arg[2:].split('=', 1)[0] if arg.startswith('--') else None
    if name in RENAMED_FLAGS:
      sys.exit(f'repertory.run: error: --{name} was replaced: '
               f'{RENAMED_FLAGS[name]}')
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    sys.exit(f'repertory.run: error: {e}')


def run(argv: Optional[List[str]] = None) -> None:
  """The command line of `python -m repertory.run`, for this or any script
  (`--help` shows the shared flags and the chosen agent's fields)."""
  # A process that runs one program: no collector passes over the imports
  # until the program is up (repertory/launch/process/startup_gc.py).
  startup_gc.pause()
  argv = list(sys.argv if argv is None else argv)
  _ORIGINAL_ARGV[:] = argv
  if flags.FLAGS['lp_launch_type'].default == 'local_mt':
    flags.FLAGS.set_default('lp_launch_type', 'local_mp')
  agent_name = _argv_value(argv, 'agent', flags.FLAGS['agent'].default)
  try:  # --selfplay=<rule>: the selfplay agent with --agent's loss.
    argv = selfplay_variants.rewrite_argv(argv, agent_name)
  except ValueError as e:
    sys.exit(f'repertory.run: error: {e}')
  agent_name = _argv_value(argv, 'agent', agent_name)
  argv = define_config_flag(agent_name, argv)
  if any(a in ('--help', '-h', '--helpshort', '-?') for a in argv[1:]):
    print(usage(agent_name))
    return
  app.run(main, argv=argv, flags_parser=_parse_flags)


if __name__ == '__main__':
  run()
