"""Where a program's nodes run and which are restarted: the same for
`python -m repertory.run` and `experiment.run_experiment`.

    placement.place(program, experiment)     # before launching
    restarts = placement.max_restarts(program, experiment)

In local_mp (`experiment.share_processes`) the light nodes share the
learner's process (`SHARED_PROCESSES`) and the actors run as threads of
`actor_processes(experiment.actor_processes)` processes; on Ray the actors
share processes only when `experiment.actor_processes` asks.
"""

import os
from typing import Any, Dict, Optional

# Groups that share one process in local_mp (`share_processes`): the
# first names the process. The learner needs TensorFlow, the replay node's
# Reverb server links it, the monitor's Reverb client (table sizes) and the
# evaluations import it; the counter, monitor and evaluator are light (a few
# calls a second, an evaluation now and then), so in the learner's process
# they cost a thread each instead of a process with TensorFlow. A node of
# another group that raises is restarted in its thread (`max_restarts`).
# With `restart_learner` the learner keeps its own process (restarting it
# would take the others with it).
SHARED_PROCESSES = ('learner', 'replay', 'monitor', 'counter', 'evaluator')
SHARED_PROCESSES_RESTARTABLE_LEARNER = ('monitor', 'counter', 'evaluator')
# Groups whose nodes are restarted after a crash (when the program has them).
RESTARTABLE_GROUPS = ('actor', 'evaluator', 'environment')
LOCAL_PROCESSES = ('local_mp', 'test_mp')


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


def place(program: Any, experiment: Any) -> Any:
  """Shares processes in `program` as `experiment` asks for its launch
  type (see the module doc); placing a program twice changes nothing.
  Returns `program`."""
  launch_type = experiment.launch_type
  if experiment.share_processes and launch_type in LOCAL_PROCESSES:
    share_processes(program, restart_learner=experiment.restart_learner)
  if 'actor' not in program.groups:
    return program
  if launch_type in LOCAL_PROCESSES and (experiment.share_processes or
                                         experiment.actor_processes):
    program.spread_group('actor', actor_processes(experiment.actor_processes))
  elif launch_type == 'ray' and experiment.actor_processes:
    program.spread_group('actor', experiment.actor_processes)
  return program


def max_restarts(program: Any, experiment: Any) -> Dict[str, int]:
  """Group -> how often a crashed node of it is restarted: the restartable
  groups the program has (and the learner with `restart_learner`)."""
  groups = [g for g in RESTARTABLE_GROUPS if g in program.groups]
  if experiment.restart_learner:
    groups.append('learner')
  return {g: experiment.max_restarts for g in groups}


def actor_units(program: Any) -> Optional[int]:
  """How many processes the program's actors run in (None: no actors)."""
  return sum(u.label == 'actor' for u in program.units) or None
