"""Evaluation episodes of a `core.Actor` in a `dm_env.Environment`
(`evaluate`), and the evaluator node that runs them periodically during
training (`PeriodicEvaluator`)."""

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional

import dm_env
import numpy as np

from repertory import core
from repertory import launch
from repertory.components import statistics

# How often the evaluator looks at the counter (evaluations by time, or
# actors that count through the counter rather than the budget).
POLL_SECONDS = 0.5
# Share of the training steps that evaluation may spend by default.
EVAL_FRACTION = 0.1


@dataclasses.dataclass
class EvaluationResult:
  """Returns and lengths of finished evaluation episodes.

  Attributes:
    returns, lengths: per episode.
    policy_version: the version of the weights evaluated (None: unknown).
    parts: results of the same weights in named settings (e.g. one per seat
      of a two-player game), flattened by `as_dict` as
      `<prefix>_<name>_...`.
  """
  returns: List[float]
  lengths: List[int]
  policy_version: Optional[int] = None
  parts: Dict[str, 'EvaluationResult'] = dataclasses.field(
      default_factory=dict)

  @property
  def return_mean(self) -> float:
    return float(np.mean(self.returns)) if self.returns else float('nan')

  @property
  def steps(self) -> int:
    """Environment steps played (with those of every part)."""
    return int(sum(self.lengths)) + sum(p.steps for p in self.parts.values())

  def as_dict(self, prefix: str = 'eval') -> dict:
    """The row of an evaluation: mean, standard deviation and 95% interval
    of the return, episodes, steps, mean length, policy version."""
    _, low, high = statistics.mean_interval(self.returns)
    row = {
        f'{prefix}_return_mean': self.return_mean,
        f'{prefix}_return_std': (float(np.std(self.returns))
                                 if self.returns else float('nan')),
        f'{prefix}_return_ci95_low': low,
        f'{prefix}_return_ci95_high': high,
        f'{prefix}_length_mean': (float(np.mean(self.lengths))
                                  if self.lengths else float('nan')),
        f'{prefix}_episodes': len(self.returns),
        f'{prefix}_steps': self.steps,
    }
    if self.policy_version is not None:
      row[f'{prefix}_policy_version'] = int(self.policy_version)
    for name, part in self.parts.items():
      part_row = part.as_dict(f'{prefix}_{name}')
      part_row.pop(f'{prefix}_{name}_policy_version', None)
      row.update(part_row)
    return row


def policy_version(actor: core.Actor) -> Optional[int]:
  """The version of the weights `actor` acts with, if it says."""
  version = getattr(actor, 'version', None)
  if version is None:
    version = getattr(actor, '_version', None)
  try:
    return int(version) if version is not None and version >= 0 else None
  except TypeError:
    return None


def evaluate(environment: dm_env.Environment, actor: core.Actor,
             num_episodes: int, max_steps_per_episode: int = 100_000,
             max_steps: Optional[int] = None) -> EvaluationResult:
  """Plays up to `num_episodes` full episodes with `actor`; records nothing.

  With `max_steps`, a new episode starts only while the steps played plus
  the mean length so far stay within `max_steps` (the first always
  starts): evaluation costs about `max_steps` at most, in whole episodes.
  The actor should already hold the weights to evaluate (call
  `actor.update(wait=True)` first); the result names their version.
  """
  if num_episodes < 1:
    raise ValueError(f'num_episodes must be >= 1, got {num_episodes}.')
  returns, lengths = [], []
  for _ in range(num_episodes):
    if max_steps is not None and lengths and (
        sum(lengths) + np.mean(lengths) > max_steps):
      break
    timestep = environment.reset()
    actor.observe_first(timestep)
    episode_return, length = 0.0, 0
    while not timestep.last():
      action = actor.select_action(timestep.observation)
      timestep = environment.step(action)
      actor.observe(action, next_timestep=timestep)
      episode_return += float(np.sum(timestep.reward))
      length += 1
      if length >= max_steps_per_episode:
        break
    returns.append(episode_return)
    lengths.append(length)
  return EvaluationResult(returns, lengths, policy_version(actor))


class PeriodicEvaluator(core.Worker):
  """An evaluator node: evaluates the learner's weights every `every_steps`
  actor steps and/or every `every_seconds`, and sends each result to the
  run monitor (`RunMonitor.record_evaluation`).

  By steps, the evaluation takes the weights at the step asked for: the
  monitor holds the actors' budget there (`wait_for_evaluation_point`)
  until the weights are fetched, so the evaluated step is within one
  batched actor step of the schedule (when the evaluator is ready in time;
  a late one evaluates at once, at the step reached). Each evaluation
  plays up to `num_episodes`, within `eval_fraction` of the training steps
  since the previous one (`evaluate(max_steps=...)`).

  Example::

    with program.group('evaluator'):
      program.add_node(launch.CourierNode(
          PeriodicEvaluator, counter, monitor, make_environment,
          make_eval_actor, learner, num_episodes=10, every_steps=20_000))

  Args:
    counter: the shared counter (handle); `actor_steps` and
      `learner_steps` are recorded beside each evaluation.
    monitor: the run monitor (handle), or anything with `record_evaluation`
      (and, for exact points, `wait_for_evaluation_point` and
      `release_evaluation_point`).
    make_environment: builds the evaluation environment.
    make_eval_actor: builds a `core.Actor` from `variable_source` (greedy).
    variable_source: the learner (handle).
    num_episodes: episodes per evaluation (at most).
    every_steps: actor steps between evaluations (0: not by steps).
    every_seconds: seconds between evaluations (0: not by time).
    eval_fraction: evaluation steps at most this share of the training
      steps between two evaluations (None: no limit).
  """

  def __init__(self, counter: Any, monitor: Any,
               make_environment: Callable[[], dm_env.Environment],
               make_eval_actor: Callable[[Any], core.Actor],
               variable_source: Any, num_episodes: int = 10,
               every_steps: int = 0, every_seconds: float = 0.0,
               eval_fraction: Optional[float] = EVAL_FRACTION):
    if num_episodes < 1:
      raise ValueError(f'num_episodes must be >= 1, got {num_episodes}.')
    if every_steps < 0 or every_seconds < 0 or not (every_steps or
                                                    every_seconds):
      raise ValueError('Set every_steps and/or every_seconds (> 0); got '
                       f'every_steps={every_steps}, '
                       f'every_seconds={every_seconds}.')
    if eval_fraction is not None and eval_fraction <= 0:
      raise ValueError(f'eval_fraction must be > 0, got {eval_fraction}.')
    self._counter = counter
    self._monitor = monitor
    self._make_environment = make_environment
    self._make_eval_actor = make_eval_actor
    self._variable_source = variable_source
    self._num_episodes = num_episodes
    self._every_steps = every_steps
    self._every_seconds = every_seconds
    self._eval_fraction = eval_fraction
    self.evaluations = 0

  def _next_point(self, stop: Any, next_steps: int, last_time: float
                  ) -> Optional[Dict[str, Any]]:
    """Waits for the next evaluation (by steps or by time); returns the
    counts then (None once the program stops). By steps, the monitor holds
    the actors at `next_steps` until `release_evaluation_point`."""
    exact = self._every_steps and hasattr(self._monitor,
                                          'wait_for_evaluation_point')
    while not stop.is_set():
      if exact:
        counts = self._monitor.wait_for_evaluation_point(next_steps,
                                                         POLL_SECONDS)
        if counts is not None:
          return counts
      elif stop.wait(POLL_SECONDS):
        return None
      counts = None
      if self._every_seconds and (
          time.monotonic() - last_time >= self._every_seconds):
        counts = self._counter.get_counts()
      elif self._every_steps and not exact:
        counts = self._counter.get_counts()
        if int(counts.get('actor_steps', 0)) < next_steps:
          counts = None
      if counts is not None:
        return dict(counts, held=bool(exact))
    return None

  def run(self) -> None:
    stop = launch.stop_event()
    environment, actor = None, None  # Built at the first evaluation.
    next_steps = self._every_steps
    last_time, last_steps = time.monotonic(), None
    try:
      while True:
        counts = self._next_point(stop, next_steps, last_time)
        if counts is None:
          return
        steps = int(counts.get('actor_steps', 0))
        if self._every_steps:
          next_steps = (steps // self._every_steps + 1) * self._every_steps
        try:
          if actor is None:
            environment = self._make_environment()
            actor = self._make_eval_actor(self._variable_source)
          actor.update(wait=True)  # The weights at `steps`.
        finally:
          if counts.get('held', True):  # Held again at the next point.
            self._monitor.release_evaluation_point(
                next_steps if self._every_steps else None)
        trained = steps - (last_steps if last_steps is not None else
                           max(steps - (self._every_steps or steps), 0))
        max_steps = (None if self._eval_fraction is None else
                     max(int(self._eval_fraction * trained), 1))
        result = evaluate(environment, actor, self._num_episodes,
                          max_steps=max_steps)
        if stop.is_set():
          return
        self._monitor.record_evaluation(
            steps, int(counts.get('learner_steps', 0)), result.as_dict('eval'))
        self.evaluations += 1
        last_time, last_steps = time.monotonic(), steps
    except Exception:  # pylint: disable=broad-except
      if not stop.is_set():
        raise  # The learner or monitor going away while stopping is expected.
    finally:
      if environment is not None:
        environment.close()
