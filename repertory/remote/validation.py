"""What the service accepts from a client: one `Step` checked field by field.

Every check names the field it refuses (`step.reward: 1e+30 is outside
[-1000, 1000] ...`); the service answers INVALID_ARGUMENT with that text and
nothing of the step reaches the agent. Besides the wire format (sizes,
dtypes, finite floats), a step must stay inside what the agent declared:

* observations inside the observation spec's bounds (a `BoundedArray`), or,
  for a spec without bounds, inside +-`max_abs_observation`;
* rewards inside the reward spec's bounds, or inside +-`max_abs_reward`.

So one client cannot feed values that overflow the learner's updates.
"""

import dataclasses
from typing import Any, Optional, Tuple

import numpy as np

from repertory_remote import wire

MAX_ABS_REWARD = 1000.0
MAX_ABS_OBSERVATION = 1e6


@dataclasses.dataclass(frozen=True)
class Limits:
  """The values a client may send.

  Attributes:
    observation: (minimum, maximum) arrays broadcastable to the observation
      shape, or None for +-max_abs_observation (float dtypes only).
    reward: (minimum, maximum).
  """
  observation: Optional[Tuple[np.ndarray, np.ndarray]] = None
  reward: Tuple[float, float] = (-MAX_ABS_REWARD, MAX_ABS_REWARD)
  max_abs_observation: float = MAX_ABS_OBSERVATION

  @classmethod
  def from_dm_env(cls, observation_spec: Any, reward_spec: Any = None,
                  max_abs_reward: float = MAX_ABS_REWARD,
                  max_abs_observation: float = MAX_ABS_OBSERVATION
                  ) -> 'Limits':
    """The bounds a dm_env spec declares (`BoundedArray`), else the
    absolute limits."""
    if max_abs_reward <= 0 or max_abs_observation <= 0:
      raise ValueError('max_abs_reward and max_abs_observation must be > 0, '
                       f'got {max_abs_reward} and {max_abs_observation}.')
    observation = None
    if hasattr(observation_spec, 'minimum'):
      observation = (np.asarray(observation_spec.minimum, np.float64),
                     np.asarray(observation_spec.maximum, np.float64))
    low, high = -max_abs_reward, max_abs_reward
    if reward_spec is not None and hasattr(reward_spec, 'minimum'):
      low = max(low, float(np.min(reward_spec.minimum)))
      high = min(high, float(np.max(reward_spec.maximum)))
    return cls(observation, (low, high), max_abs_observation)


class Step:
  """One validated step (see `parse`)."""

  def __init__(self, episode_id, observation, reward, terminal, truncated,
               mask, logged_action, logged_logits):
    self.episode_id = episode_id
    self.observation = observation
    self.reward = reward
    self.terminal = terminal
    self.truncated = truncated
    self.mask = mask
    self.logged_action = logged_action
    self.logged_logits = logged_logits

  @property
  def ends(self) -> bool:
    return self.terminal or self.truncated


def parse(step: Any, specs: wire.Specs, limits: Limits,
          unsupported: dict) -> Step:
  """Checks a `pb.Step`; raises `wire.FieldError` naming the bad field."""
  if not step.HasField('observation'):
    raise wire.FieldError('step.observation', 'missing')
  observation = wire.tensor_from_proto(step.observation, specs,
                                       'step.observation')
  check_observation(observation, limits)
  reward = float(step.reward)
  check_reward(reward, limits)
  if step.terminal and step.truncated:
    raise wire.FieldError('step.terminal', 'terminal and truncated are both '
                          'set')
  mask = wire.mask_from_proto(step.legal_actions, specs.num_actions,
                              'step.legal_actions')
  for field, present in (('step.legal_actions', mask is not None),
                         ('step.logged', step.HasField('logged'))):
    if present and field in unsupported:
      raise wire.FieldError(field, unsupported[field])
  logged_action, logged_logits = None, None
  if step.HasField('logged'):
    logged_action, logged_logits = _logged(step.logged, specs, mask)
  return Step(int(step.episode_id), observation, reward, bool(step.terminal),
              bool(step.truncated), mask, logged_action, logged_logits)


def check_reward(reward: float, limits: Limits) -> None:
  if not np.isfinite(reward):
    raise wire.FieldError('step.reward', f'{reward} is not finite')
  low, high = limits.reward
  if not low <= reward <= high:
    raise wire.FieldError(
        'step.reward', f'{reward:g} is outside [{low:g}, {high:g}] (the '
        "reward spec's bounds, or the service's max_abs_reward): scale the "
        "game's rewards")


def check_observation(observation: np.ndarray, limits: Limits) -> None:
  """Raises naming the first value outside the declared bounds."""
  if limits.observation is not None:
    low, high = limits.observation
    values = observation.astype(np.float64)
    outside = (values < low) | (values > high)
    what = 'the observation spec\'s bounds'
  elif observation.dtype.kind == 'f':
    limit = limits.max_abs_observation
    values = observation.astype(np.float64)
    low, high = -limit, limit
    outside = np.abs(values) > limit
    what = "the service's max_abs_observation"
  else:
    return
  if not outside.any():
    return
  index = tuple(int(i) for i in np.argwhere(outside)[0])
  low_i = float(np.broadcast_to(low, observation.shape)[index])
  high_i = float(np.broadcast_to(high, observation.shape)[index])
  raise wire.FieldError(
      'step.observation', f'{values[index]:g} at index {list(index)} is '
      f'outside [{low_i:g}, {high_i:g}] ({what})')


def _logged(logged: Any, specs: wire.Specs, mask: Optional[np.ndarray]):
  action = int(logged.action)
  if not 0 <= action < specs.num_actions:
    raise wire.FieldError('step.logged.action', f'{action} is not in 0 .. '
                          f'{specs.num_actions - 1}')
  if mask is not None and not mask[action]:
    raise wire.FieldError('step.logged.action', f'{action} is not legal '
                          'under step.legal_actions')
  logits = None
  if len(logged.logits):
    logits = np.asarray(logged.logits, np.float32)
    if logits.shape != (specs.num_actions,):
      raise wire.FieldError('step.logged.logits', f'{len(logits)} values, '
                            f'expected {specs.num_actions}')
    if not np.all(np.isfinite(logits)):
      raise wire.FieldError('step.logged.logits',
                            'holds NaN or infinite values')
  return action, logits
