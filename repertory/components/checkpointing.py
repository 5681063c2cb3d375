"""When a run checkpoints, set once per experiment (not per agent).

    experiment = ExperimentConfig(checkpoint=CheckpointSettings(every_steps=500))
    host = learners.LearnerHost(algorithm, checkpoint=experiment.checkpoint,
                                checkpoint_dir=logdir + '/checkpoints')

Every agent's learner host and replay node read these; this module imports
neither TensorFlow nor Reverb, so configs stay light.
"""

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

# Before these settings moved to the experiment, each agent's Config held
# them under these names (a `config.json` of an older run still does).
LEGACY_AGENT_FIELDS = {
    'checkpoint_every_steps': 'every_steps',
    'checkpoint_every_minutes': 'every_minutes',
    'checkpoints_to_keep': 'to_keep',
    'max_bad_updates': 'max_bad_updates',
    'replay_checkpoint_minutes': 'replay_every_minutes',
}


@dataclasses.dataclass
class CheckpointSettings:
  """Checkpoint cadence and fault tolerance of the learner and the replay.

  Attributes:
    every_steps: the learner checkpoints its state (network, optimizer, step,
      version) into `<logdir>/checkpoints` every this many learner steps
      (None: by time only). A PPO step is one round.
    every_minutes: ...and at least this often (None: by steps only).
    to_keep: how many of the latest checkpoints stay on disk.
    max_bad_updates: a non-finite loss or gradient skips the update; after
      this many in a row the learner rolls back to its latest checkpoint.
    replay_every_minutes: the Reverb server checkpoints its tables into
      `<logdir>/replay` this often and when the program stops, and restores
      them on resume (None: never). Agents without replay ignore it.
    keep_initial: the learner's first checkpoint (its state as built) is
      also tagged 'initial', outside the rotation, so that it can restart
      from it (`LearnerHost.reset()`; a league's main exploiters set it).
  """
  every_steps: Optional[int] = 1000
  every_minutes: Optional[float] = 2.0
  to_keep: int = 3
  max_bad_updates: int = 10
  replay_every_minutes: Optional[float] = 5.0
  keep_initial: bool = False

  def __post_init__(self):
    for name in ('to_keep', 'max_bad_updates'):
      value = getattr(self, name)
      if not isinstance(value, int) or value < 1:
        raise ValueError(f'CheckpointSettings.{name} must be a positive int, '
                         f'got {value!r}.')
    for name in ('every_steps', 'every_minutes', 'replay_every_minutes'):
      value = getattr(self, name)
      if value is not None and not value > 0:
        raise ValueError(f'CheckpointSettings.{name} must be > 0 or None, '
                         f'got {value!r}.')


def upgrade_saved_config(saved: Mapping[str, Any]) -> Dict[str, Any]:
  """A `config.json` of an older run, with its agent's checkpoint fields moved
  to `experiment.checkpoint` (what a run of this version writes).

  Lets a run started before the move resume with the same settings; a saved
  config without those fields is returned unchanged.
  """
  saved = dict(saved)
  agent = dict(saved.get('agent') or {})
  moved = {new: agent.pop(old) for old, new in LEGACY_AGENT_FIELDS.items()
           if old in agent}
  agent.pop('seed', None)  # Agents now take the experiment's seed.
  if not moved:
    return saved
  experiment = dict(saved.get('experiment') or {})
  defaults = dataclasses.asdict(CheckpointSettings())
  experiment.setdefault('checkpoint', {**defaults, **moved})
  saved['agent'], saved['experiment'] = agent, experiment
  return saved


def split_overrides(overrides: Mapping[str, str]
                    ) -> Tuple[Dict[str, str], Dict[str, str]]:
  """Separates checkpoint settings from an agent's `--config.*` overrides.

  `--config.checkpoint.<field>=...` and the former agent field names
  (`--config.checkpoint_every_steps=...`, see `LEGACY_AGENT_FIELDS`) both
  set `CheckpointSettings.<field>`. Returns (agent overrides, checkpoint
  overrides by `CheckpointSettings` field).
  """
  agent, checkpoint = {}, {}
  for name, value in overrides.items():
    if name.startswith('checkpoint.'):
      checkpoint[name[len('checkpoint.'):]] = value
    elif name in LEGACY_AGENT_FIELDS:
      checkpoint[LEGACY_AGENT_FIELDS[name]] = value
    else:
      agent[name] = value
  return agent, checkpoint
