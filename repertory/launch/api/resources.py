"""Resources per group (`local_resources`, `--lp_resources`) and restarts
per group (`max_restarts`): parsed and checked before anything starts."""

import os
from typing import Any, Dict, List, Mapping, Optional

from repertory.launch.api import compat
from repertory.launch.api import program as program_lib

RESOURCE_KEYS = ('num_cpus', 'num_gpus', 'memory', 'resources', 'env', 'cpus')
# The resources of a local Ray instance (local_mp): --lp_resources names.
LOCAL_RESOURCE_NAMES = ('cpu', 'gpu', 'memory', 'cpus')


def parse_resources(spec: str) -> Dict[str, Dict[str, Any]]:
  """Parses "learner=cpu:1,gpu:1 actor=cpu:1,my_res:1" into local_resources.

  `cpu`, `gpu` and `memory` (bytes) map to Ray's num_cpus, num_gpus and
  memory; `cpus:2` or `cpus:2-3` pins the group's processes to those CPU
  cores (`cpus`: a list of core ids); any other name is a custom Ray
  resource.
  """
  result: Dict[str, Dict[str, Any]] = {}
  for group in spec.split():
    label, sep, items = group.partition('=')
    if not sep or not label or not items:
      raise ValueError(f'Bad resources entry {group!r} in {spec!r}: expected '
                       'label=name:amount[,name:amount...], e.g. '
                       '"learner=cpu:1,gpu:1 actor=cpu:1,my_res:1".')
    entry: Dict[str, Any] = {}
    for item in items.split(','):
      name, sep, amount = item.partition(':')
      if name == 'cpus':
        entry['cpus'] = _parse_cpus(amount, item, label, spec)
        continue
      try:
        value = float(amount)
      except ValueError:
        value = None
      if not sep or not name or value is None:
        raise ValueError(f'Bad resource {item!r} for group {label!r} in '
                         f'{spec!r}: expected name:amount, e.g. cpu:1.')
      if name == 'cpu':
        entry['num_cpus'] = value
      elif name == 'gpu':
        entry['num_gpus'] = value
      elif name == 'memory':
        entry['memory'] = value
      else:
        entry.setdefault('resources', {})[name] = value
    result[label] = entry
  return result


def _parse_cpus(amount: str, item: str, label: str, spec: str) -> List[int]:
  first, dash, last = amount.partition('-')
  if not (first.isdigit() and (not dash or last.isdigit())) or (
      dash and int(last) < int(first)):
    raise ValueError(f'Bad resource {item!r} for group {label!r} in {spec!r}: '
                     'expected cpus:<core> or cpus:<first>-<last>, e.g. '
                     'cpus:1 or cpus:2-3.')
  return list(range(int(first), int(last if dash else first) + 1))


def _check_cpus(label: str, cpus: Any, this_machine: bool) -> None:
  """A list of core ids; of this machine's unless the processes may run on
  a cluster's other machines (a core one lacks fails its process)."""
  available = sorted(os.sched_getaffinity(0)) if this_machine else None
  if (not isinstance(cpus, (list, tuple)) or not cpus or not all(
      isinstance(c, int) and c >= 0 and (available is None or c in available)
      for c in cpus)):
    choices = f'from {available}' if this_machine else '(ints >= 0)'
    raise ValueError(f"local_resources[{label!r}]['cpus'] must be a list of "
                     f'CPU core ids {choices}, got {cpus!r}.')


def check_local_resources(program: program_lib.Program,
                          local_resources: Optional[Mapping[str, Any]],
                          launch_type: str) -> Dict[str, Dict[str, Any]]:
  """`local_resources` checked (see `check_resources`), as plain dicts."""
  if not local_resources:
    return {}
  groups = sorted(program.groups)
  local_resources = {
      label: (entry.as_resources(label)
              if isinstance(entry, compat.PythonProcess) else entry)
      for label, entry in local_resources.items()}
  for label, entry in local_resources.items():
    if label not in program.groups:
      raise ValueError(f'local_resources names group {label!r}, which is not '
                       f'in program {program.name!r}; its groups are {groups}.')
    if not isinstance(entry, Mapping):
      raise ValueError(f'local_resources[{label!r}] must be a dict with keys '
                       f'from {RESOURCE_KEYS}, got {entry!r}.')
    for key in entry:
      if key not in RESOURCE_KEYS:
        raise ValueError(f'local_resources[{label!r}] has unknown key {key!r}; '
                         f'valid keys are {RESOURCE_KEYS}.')
    if 'cpus' in entry:
      _check_cpus(label, entry['cpus'], this_machine=launch_type != 'ray')
    custom = sorted(entry.get('resources') or {})
    if custom and launch_type in ('local_mp', 'test_mp'):
      # The local instance has none: its process would wait for ever.
      raise ValueError(
          f'Unknown resource {custom[0]!r} for group {label!r}: the local Ray '
          f'instance of {launch_type} has only {LOCAL_RESOURCE_NAMES} (custom '
          "resources need a cluster: --lp_launch_type=ray).")
  return {k: dict(v) for k, v in local_resources.items()}


def check_cluster_resources(local_resources: Mapping[str, Mapping[str, Any]],
                            available: Mapping[str, float],
                            where: str) -> None:
  """Raises `ValueError` (one line) for a custom resource that no node of
  the cluster has (`available`: `ray.cluster_resources()`), which would
  leave its group's processes waiting for ever."""
  names = sorted(n for n in available if not n.startswith('node:'))
  for label, entry in local_resources.items():
    for name in sorted(entry.get('resources') or {}):
      if name not in available:
        raise ValueError(
            f'Unknown resource {name!r} for group {label!r}: no node of the '
            f'Ray cluster at {where} has it; its resources are {names}.')


def check_resources(program: program_lib.Program,
                    local_resources: Optional[Mapping[str, Any]],
                    launch_type: str) -> None:
  """Raises `ValueError` (one line) if `launch(program, launch_type,
  local_resources=...)` would refuse them: a group the program lacks, an
  unknown key, cores this machine lacks or a custom resource (for a local
  launch type)."""
  check_local_resources(program, local_resources, launch_type)


def check_max_restarts(program: program_lib.Program,
                        max_restarts: Optional[Mapping[str, int]]
                        ) -> Dict[str, int]:
  if not max_restarts:
    return {}
  if not isinstance(max_restarts, Mapping):
    raise ValueError('max_restarts must be a dict {group label: restarts}, '
                     f'e.g. {{"actor": 3}}, got {max_restarts!r}.')
  for label, value in max_restarts.items():
    if label not in program.groups:
      raise ValueError(f'max_restarts names group {label!r}, which is not in '
                       f'program {program.name!r}; its groups are '
                       f'{sorted(program.groups)}.')
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
      raise ValueError(f'max_restarts[{label!r}] must be an int >= 0, got '
                       f'{value!r}.')
  return dict(max_restarts)
