"""Evaluation episodes of a `core.Actor` in a `dm_env.Environment`
(`evaluate`), and the evaluator node that runs them periodically during
training (`PeriodicEvaluator`)."""

import dataclasses
import time
from typing import Any, Callable, List

import dm_env
import numpy as np

from repertory import core
from repertory import launch

# How often the evaluator looks at the counter.
POLL_SECONDS = 0.5


@dataclasses.dataclass
class EvaluationResult:
  """Returns and lengths of finished evaluation episodes."""
  returns: List[float]
  lengths: List[int]

  @property
  def return_mean(self) -> float:
    return float(np.mean(self.returns)) if self.returns else float('nan')

  def as_dict(self, prefix: str = 'eval') -> dict:
    return {
        f'{prefix}_return_mean': self.return_mean,
        f'{prefix}_return_std': float(np.std(self.returns)),
        f'{prefix}_length_mean': float(np.mean(self.lengths)),
        f'{prefix}_episodes': len(self.returns),
    }


def evaluate(environment: dm_env.Environment, actor: core.Actor,
             num_episodes: int, max_steps_per_episode: int = 100_000
             ) -> EvaluationResult:
  """Plays `num_episodes` full episodes with `actor`; nothing is recorded.

  The actor should already hold the weights to evaluate (call
  `actor.update(wait=True)` first).
  """
  if num_episodes < 1:
    raise ValueError(f'num_episodes must be >= 1, got {num_episodes}.')
  returns, lengths = [], []
  for _ in range(num_episodes):
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
  return EvaluationResult(returns, lengths)


class PeriodicEvaluator(core.Worker):
  """An evaluator node: evaluates the learner's current weights every
  `every_steps` actor steps and/or every `every_seconds`, and sends each
  result to the run monitor (`RunMonitor.record_evaluation`).

  Example::

    with program.group('evaluator'):
      program.add_node(launch.CourierNode(
          PeriodicEvaluator, counter, monitor, make_environment,
          make_eval_actor, learner, num_episodes=10, every_steps=20_000))

  Args:
    counter: the shared counter (handle); `actor_steps` sets the cadence and
      `learner_steps` is recorded beside each evaluation.
    monitor: the run monitor (handle), or anything with `record_evaluation`.
    make_environment: builds the evaluation environment.
    make_eval_actor: builds a `core.Actor` from `variable_source` (greedy).
    variable_source: the learner (handle).
    num_episodes: episodes per evaluation.
    every_steps: actor steps between evaluations (0: not by steps).
    every_seconds: seconds between evaluations (0: not by time).
  """

  def __init__(self, counter: Any, monitor: Any,
               make_environment: Callable[[], dm_env.Environment],
               make_eval_actor: Callable[[Any], core.Actor],
               variable_source: Any, num_episodes: int = 10,
               every_steps: int = 0, every_seconds: float = 0.0):
    if num_episodes < 1:
      raise ValueError(f'num_episodes must be >= 1, got {num_episodes}.')
    if every_steps < 0 or every_seconds < 0 or not (every_steps or
                                                    every_seconds):
      raise ValueError('Set every_steps and/or every_seconds (> 0); got '
                       f'every_steps={every_steps}, '
                       f'every_seconds={every_seconds}.')
    self._counter = counter
    self._monitor = monitor
    self._make_environment = make_environment
    self._make_eval_actor = make_eval_actor
    self._variable_source = variable_source
    self._num_episodes = num_episodes
    self._every_steps = every_steps
    self._every_seconds = every_seconds
    self.evaluations = 0

  def run(self) -> None:
    stop = launch.stop_event()
    environment, actor = None, None  # Built at the first evaluation.
    next_steps = self._every_steps
    last_time = time.monotonic()
    try:
      while not stop.wait(POLL_SECONDS):
        counts = self._counter.get_counts()
        steps = int(counts.get('actor_steps', 0))
        by_steps = self._every_steps and steps >= next_steps
        by_time = (self._every_seconds and
                   time.monotonic() - last_time >= self._every_seconds)
        if not (by_steps or by_time):
          continue
        if actor is None:
          environment = self._make_environment()
          actor = self._make_eval_actor(self._variable_source)
        actor.update(wait=True)
        result = evaluate(environment, actor, self._num_episodes)
        if stop.is_set():
          return
        self._monitor.record_evaluation(
            steps, int(counts.get('learner_steps', 0)), result.as_dict('eval'))
        self.evaluations += 1
        last_time = time.monotonic()
        if self._every_steps:
          next_steps = (steps // self._every_steps + 1) * self._every_steps
    except Exception:  # pylint: disable=broad-except
      if not stop.is_set():
        raise  # The learner or monitor going away while stopping is expected.
    finally:
      if environment is not None:
        environment.close()
