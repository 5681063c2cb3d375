"""Dropping samples whose behaviour policy lags too far behind the learner."""

from typing import Any, NamedTuple

import numpy as np
import tree


class StaleFilterResult(NamedTuple):
  """What `drop_stale` returns.

  Attributes:
    kept: the batch with only the fresh items (leading dim B' <= B).
    num_dropped: B - B'.
    lag: [B] int64, learner_version - policy_version of every item.
    mask: [B] bool, True for the kept items.
  """
  kept: Any
  num_dropped: int
  lag: np.ndarray
  mask: np.ndarray


def policy_lag(policy_version, learner_version: int) -> np.ndarray:
  """[B] learner_version - the items' behaviour policy versions."""
  return int(learner_version) - np.asarray(policy_version, np.int64)


def drop_stale(batch, learner_version: int,
               max_policy_lag: int) -> StaleFilterResult:
  """Keeps the items at most `max_policy_lag` versions behind the learner.

  Args:
    batch: a `reverb.ReplaySample` (its `data['policy_version']` is [B]) or
      a dict with a 'policy_version' entry; every leaf has a leading [B].
    learner_version: the learner's current policy version.
    max_policy_lag: the largest lag kept (0 keeps only current-policy data).
  """
  if max_policy_lag < 0:
    raise ValueError(f'max_policy_lag must be >= 0, got {max_policy_lag}.')
  data = batch.data if hasattr(batch, 'data') else batch
  if 'policy_version' not in data:
    raise KeyError(
        'drop_stale needs items with a policy_version column (written by the '
        f'repertory adders); the batch has {sorted(data)}.')
  lag = policy_lag(data['policy_version'], learner_version)
  mask = lag <= max_policy_lag
  num_dropped = int(mask.size - mask.sum())
  if num_dropped == 0:
    kept = batch
  else:
    kept = tree.map_structure(lambda x: np.asarray(x)[mask], batch)
  return StaleFilterResult(kept, num_dropped, lag, mask)
