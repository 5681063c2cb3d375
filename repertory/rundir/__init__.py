"""The run directory: what a run checks before it starts, and its attempts.

    resuming, warnings = rundir.preflight(logdir, saved)  # RunDirError
    attempt = rundir.start_attempt(logdir, saved)
    ...                                          # launch the program
    results = attempt.end()                      # None: no results this time

A run directory holds one run, trained over one or more *attempts* (each
`python -m repertory.run` or `run_experiment` on it). What is where:

    config.json            settings of the latest attempt
    counts.json            step counts, continued across attempts
    checkpoints/latest/    the learner's rotating checkpoints (model store)
    checkpoints/unreadable/  learner checkpoints set aside as unreadable
    replay/<time>/         the replay's checkpoints (agents with replay)
    replay-unreadable/     replay checkpoints set aside as unreadable
    results.json           results of the latest attempt that finished
    attempts/<n>/          attempt n (1, 2, ...): attempt.json (start, end,
                           command line, CPU cores and load average at the
                           start, status, counts), config.json, and results.json
                           if it finished; never rewritten by a later attempt

`preflight` refuses, with one line naming the path, a `--logdir` that is a
file or cannot be written, a directory holding run files without a
`config.json`, a corrupt `config.json` or `counts.json`, settings that
differ from the saved run's (`compat`), a finished run whose budget is not
raised, and damaged parts it cannot set aside (`parts`): no readable
learner checkpoint, counts without checkpoints, checkpoints without counts.
It returns a line for each part it set aside or restored. The directory
may have moved since the run started. `oversubscription` warns when there
are far more actor processes than cores.
"""

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from repertory.rundir import parts
from repertory.rundir.attempts import Attempt
from repertory.rundir.attempts import attempts
from repertory.rundir.attempts import check_budget
from repertory.rundir.attempts import command_line
from repertory.rundir.attempts import finished
from repertory.rundir.attempts import processor
from repertory.rundir.attempts import start_attempt
from repertory.rundir.compat import check_resume
from repertory.rundir.compat import config_differences
from repertory.rundir.compat import default_config
from repertory.rundir.compat import RESUMABLE_CHANGES
from repertory.rundir.compat import saved_config
from repertory.rundir.files import ATTEMPT
from repertory.rundir.files import ATTEMPTS
from repertory.rundir.files import CHECKPOINTS
from repertory.rundir.files import check_writable
from repertory.rundir.files import CONFIG
from repertory.rundir.files import COUNTS
from repertory.rundir.files import read_counts
from repertory.rundir.files import read_json
from repertory.rundir.files import RESULTS
from repertory.rundir.files import resumed_at
from repertory.rundir.files import RUN_FILES
from repertory.rundir.files import RunDirError
from repertory.rundir.files import saved_counts
from repertory.rundir.files import write_json

__all__ = [
    'ATTEMPT', 'ATTEMPTS', 'Attempt', 'CHECKPOINTS', 'CONFIG', 'COUNTS',
    'RESULTS', 'RESUMABLE_CHANGES', 'RUN_FILES', 'RunDirError', 'attempts',
    'check_budget', 'check_resume', 'command_line', 'check_run_files',
    'check_writable', 'config_differences', 'default_config', 'finished',
    'oversubscription', 'preflight', 'preflight_run', 'processor', 'read_counts',
    'read_json',
    'resumed_at', 'saved_config', 'saved_counts', 'start_attempt',
    'write_json',
]
# More actor processes than this many per core make little progress.
ACTORS_PER_CORE = 4


def check_run_files(logdir: str) -> Optional[Dict[str, Any]]:
  """The saved config of the run in `logdir` (None for a new run).

  Raises `RunDirError` for a corrupt `config.json` or `counts.json`, or run
  files without a `config.json`.
  """
  path = os.path.join(logdir, CONFIG)
  if not os.path.exists(path):
    found = [name for name in RUN_FILES
             if os.path.exists(os.path.join(logdir, name))]
    if found:
      raise RunDirError(
          f'{logdir} is not a valid run directory: it holds {found} but no '
          f'{CONFIG}; restore {path} or choose another --logdir.')
    return None
  saved = read_json(path)
  for key in ('agent', 'experiment'):
    if not isinstance(saved.get(key), dict):
      raise RunDirError(f'{path} is corrupt: no "{key}" settings; restore it '
                        'from a backup or choose another --logdir.')
  read_counts(logdir)
  return saved


def check_parts(logdir: str) -> List[str]:
  """Checks the learner checkpoints, counts, replay checkpoint and tags of
  the run in `logdir` (`parts`); returns a line per part set aside or
  restored. Raises `RunDirError` for a part it cannot mend."""
  version, warnings = parts.learner_checkpoints(logdir)
  warnings += parts.counts(logdir, version)
  warnings += parts.replay_checkpoint(logdir)
  warnings += parts.tags(logdir)
  return warnings


def oversubscription(num_actors: int, envs_per_actor: int, launch_type: str,
                     cores: Optional[int] = None,
                     processes: Optional[int] = None) -> Optional[str]:
  """A warning if actors outnumber this machine's cores more than
  `ACTORS_PER_CORE` times (local launch types only), naming what to do.
  `processes`: how many processes local_mp's actors run in (default: one
  each)."""
  cores = cores or os.cpu_count() or 1
  if launch_type not in ('local_mp', 'local_mt') or (
      num_actors <= ACTORS_PER_CORE * cores):
    return None
  envs = num_actors * envs_per_actor
  processes = num_actors if processes is None else processes
  if launch_type == 'local_mt':
    kind = 'actor threads'
  elif processes >= num_actors:
    kind = 'actor processes'
  else:
    kind = (f'actors (threads of {processes} '
            f'process{"" if processes == 1 else "es"})')
  advice = (f'step the same {envs} environments with fewer actors, e.g. '
            f'--num_actors={cores} --envs_per_actor={-(-envs // cores)}')
  if launch_type == 'local_mp' and processes > 1:
    advice += (', or run the actors as threads of one process '
               '(--actor_processes=1)')
  return (f'--num_actors={num_actors} starts {num_actors} {kind} on '
          f'{cores} CPU cores (more than {ACTORS_PER_CORE} per core): they '
          f'will mostly wait for each other; {advice}.')


def preflight(logdir: str, saved: Mapping[str, Any],
              defaults: Optional[Mapping[str, Any]] = None
              ) -> Tuple[bool, List[str]]:
  """Checks `logdir` for a run with settings `saved` ({'agent': ...,
  'experiment': ...}) before anything starts; returns (whether it resumes a
  run, a line per part set aside or restored). `defaults`: keyword
  arguments of `check_resume` (the configs' defaults).

  Raises:
    RunDirError: the directory cannot be used (one line naming the path).
  """
  check_writable(logdir)
  resuming, warnings = False, []
  if check_run_files(logdir) is not None:
    resuming = check_resume(logdir, dict(saved), **dict(defaults or {}))
    warnings += check_parts(logdir)
    check_budget(logdir, int(saved['experiment']['max_actor_steps']))
  return resuming, warnings


def preflight_run(agent_config: Any, experiment: Any
                  ) -> Tuple[bool, List[str]]:
  """`preflight` for an agent's `Config` and an `ExperimentConfig`, with
  their dataclasses' defaults for fields added since a saved run."""
  return preflight(
      experiment.logdir, saved_config(agent_config, experiment),
      defaults=dict(agent_defaults=default_config(agent_config),
                    experiment_defaults=default_config(experiment),
                    agent_former_defaults=getattr(
                        agent_config, 'FORMER_DEFAULTS', None)))
