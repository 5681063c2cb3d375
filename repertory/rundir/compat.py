"""Whether a run's settings may resume the run saved in its directory."""

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

from repertory.components import checkpointing
from repertory.rundir import files
from repertory.rundir.files import RunDirError

# Settings a resumed run may change: budgets, evaluation, where and how its
# nodes run (the run directory itself may have moved).
RESUMABLE_CHANGES = ('experiment.max_actor_steps',
                     'experiment.stop_at_return',
                     'experiment.stop_evaluations', 'experiment.eval_episodes',
                     'experiment.eval_every_steps',
                     'experiment.eval_every_seconds',
                     'experiment.final_eval_episodes',
                     'experiment.eval_fraction',
                     'experiment.launch_type',
                     'experiment.progress_every_seconds',
                     'experiment.logdir',
                     'experiment.max_restarts',
                     'experiment.restart_learner',
                     'experiment.share_processes',
                     'experiment.actor_processes')


def saved_config(agent_config: Any, experiment: Any) -> Dict[str, Any]:
  """What `config.json` holds for a run: {'agent': ..., 'experiment': ...}."""
  return {'agent': dataclasses.asdict(agent_config),
          'experiment': dataclasses.asdict(experiment)}


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


def as_saved(config: Dict[str, Any]) -> Dict[str, Any]:
  """A config as `config.json` holds it (tuples as lists, etc.)."""
  return checkpointing.upgrade_saved_config(
      json.loads(json.dumps(config, default=str)))


def default_config(config: Any) -> Dict[str, Any]:
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
  """True if `logdir` holds a run to resume with settings `saved`.

  `agent_defaults`, `experiment_defaults`: the defaults of the two configs'
  fields (`default_config`), so a field added since the run was started,
  left at its default, resumes. `agent_former_defaults`: fields added with
  a default other than what runs did before them (the agent config's
  `FORMER_DEFAULTS`): a saved config without one is compared as having
  that value.

  Raises:
    RunDirError: the saved run's settings differ (naming the fields).
  """
  path = os.path.join(logdir, files.CONFIG)
  if not os.path.exists(path):
    return False
  old = checkpointing.upgrade_saved_config(files.read_json(path))
  if agent_former_defaults:
    old['agent'] = {**as_saved(agent_former_defaults),
                    **(old.get('agent') or {})}
  # Upgraded like the saved one, so an agent field that shares a legacy name
  # (selfplay's checkpoint_every_steps) compares equal to itself.
  new = as_saved(saved)
  defaults = as_saved({'agent': agent_defaults or {},
                       'experiment': experiment_defaults or {}})
  differences = config_differences(old, new, defaults=defaults)
  if differences:
    raise RunDirError(
        f'{logdir} holds a run with a different config; resume it with the '
        'same settings or choose another --logdir. Differing fields: '
        + '; '.join(differences))
  return True

