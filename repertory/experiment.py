"""What every run shares, whatever the agent: the experiment settings and the
bookkeeping nodes (a step counter and the run monitor).

An agent's `make_program(config, experiment)` adds its own nodes (replay,
learner, actors) and calls `add_counter` and `add_monitor` for the rest.
"""

import contextlib
import dataclasses
import functools
import os
import time
from typing import Any, Callable, Optional, Union

from repertory import core
from repertory import launch
from repertory.components import counting
from repertory.components import evaluation
from repertory.components.evaluation import monitor as monitor_lib

# The return at which an environment counts as solved (`--stop_at_return=auto`).
SOLVED_RETURNS = {
    'catch': 0.95,
    'bsuite:catch/0': 0.95,
    'gym:CartPole-v1': 475.0,
    'envpool:CartPole-v1': 475.0,
}


@dataclasses.dataclass
class ExperimentConfig:
  """Settings of one run that do not depend on the agent.

  Attributes:
    agent: the agent's name (recorded in results.json).
    env: what `repertory.environments.make` takes: a spec string, or a
      module-level factory returning a `dm_env.Environment` or a
      `gymnasium.Env` (pickled to every node, so it works in every launch
      type).
    num_actors: actor nodes.
    envs_per_actor: environments each actor steps per policy call.
    max_actor_steps: the run stops once actors took this many steps.
    stop_at_return: stop earlier once the judged return reaches this: a
      number, 'auto' (the environment's solved return in SOLVED_RETURNS,
      else never) or 'never' / None (run the whole budget); 'auto' and
      numbers written as text become a float or None here. Judged: the latest periodic evaluation's mean return
      when evaluation is on (`eval_every_steps` or `eval_every_seconds`),
      else the mean return of the last 100 training episodes.
    eval_episodes: evaluation episodes played with the final weights and at
      each periodic evaluation.
    eval_every_steps: a greedy evaluation of the learner's weights every
      this many actor steps, by an evaluator node (0: not by steps).
    eval_every_seconds: ... and/or every this many seconds (0: not by time).
    seed: base seed; actor i's environment j gets a seed derived from it.
    logdir: where logs, checkpoints and results.json go.
    launch_type: recorded in results.json.
    progress_every_seconds: period of the live progress line.
  """
  agent: str = 'impala'
  env: Union[str, Callable[..., Any]] = 'catch'
  num_actors: int = 2
  envs_per_actor: int = 8
  max_actor_steps: int = 1_000_000
  stop_at_return: Union[float, str, None] = 'auto'
  eval_episodes: int = 20
  eval_every_steps: int = 20_000
  eval_every_seconds: float = 0.0
  seed: int = 0
  logdir: str = ''
  launch_type: str = 'local_mt'
  progress_every_seconds: float = 5.0

  def __post_init__(self):
    for name in ('num_actors', 'envs_per_actor', 'max_actor_steps',
                 'eval_episodes'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}.')
    self.stop_at_return = _stop_at_return(self.stop_at_return, self.env)
    if self.eval_every_steps < 0 or self.eval_every_seconds < 0:
      raise ValueError('eval_every_steps and eval_every_seconds must be >= 0, '
                       f'got {self.eval_every_steps} and '
                       f'{self.eval_every_seconds}.')
    if not self.logdir:
      stamp = time.strftime('%Y%m%d-%H%M%S')
      self.logdir = os.path.join('runs', f'{self.agent}-{stamp}')

  @property
  def evaluates_periodically(self) -> bool:
    return bool(self.eval_every_steps or self.eval_every_seconds)

  def actor_seed(self, actor_id: int) -> int:
    """The seed of actor `actor_id`'s first environment (the rest follow)."""
    return self.seed * 1_000_003 + actor_id * self.envs_per_actor

  @property
  def eval_seed(self) -> int:
    return self.seed * 1_000_003 + 999_983


def _stop_at_return(value: Union[float, str, None], env: Any
                    ) -> Optional[float]:
  if value is None or isinstance(value, (int, float)):
    return None if value is None else float(value)
  if value == 'auto':
    return SOLVED_RETURNS.get(env_name(env))
  if value == 'never':
    return None
  try:
    return float(value)
  except ValueError:
    raise ValueError(f'stop_at_return={value!r}: expected a number, '
                     "'auto' or 'never'.") from None


def env_name(env: Union[str, Callable[..., Any]]) -> str:
  """A printable name of an environment spec or factory (for results.json)."""
  if isinstance(env, str):
    return env
  return getattr(env, '__qualname__', None) or repr(env)


def environment_spec(env: Union[str, Callable[..., Any]]) -> Any:
  """The `adders.EnvironmentSpec` of one environment of `env` (a spec string
  or a factory): what networks, adders and table signatures are built from."""
  from repertory import environments  # pylint: disable=g-import-not-at-top
  from repertory.components import adders  # pylint: disable=g-import-not-at-top
  with contextlib.closing(environments.make(env, seed=0)) as environment:
    return adders.make_environment_spec(environment)


def add_counter(program: launch.Program, logdir: Optional[str] = None) -> Any:
  """Adds the shared step counter; returns its handle.

  With `logdir`, the counts are saved to `<logdir>/counts.json` and continue
  from there when the run resumes.
  """
  checkpoint_path = os.path.join(logdir, 'counts.json') if logdir else None
  with program.group('counter'):
    return program.add_node(launch.CourierNode(
        counting.Counter, checkpoint_path=checkpoint_path))


def add_monitor(program: launch.Program,
                experiment: ExperimentConfig,
                counter: Any,
                variable_source: Any,
                make_eval_actor: Callable[[Any], core.Actor],
                replay: Any = None) -> Any:
  """Adds the run monitor (progress, stopping, final evaluation, results)
  and, when `experiment` asks for periodic evaluation, the evaluator node
  (group 'evaluator'). Returns the monitor's handle."""
  from repertory import environments  # pylint: disable=g-import-not-at-top
  make_environment = functools.partial(
      environments.make, experiment.env, seed=experiment.eval_seed)
  metadata = {
      'agent': experiment.agent,
      'env': env_name(experiment.env),
      'launch_type': experiment.launch_type,
      'num_actors': experiment.num_actors,
      'envs_per_actor': experiment.envs_per_actor,
      'seed': experiment.seed,
  }
  with program.group('monitor'):
    monitor = program.add_node(launch.CourierNode(
        monitor_lib.RunMonitor,
        counter=counter,
        make_environment=make_environment,
        make_eval_actor=make_eval_actor,
        variable_source=variable_source,
        logdir=experiment.logdir,
        max_actor_steps=experiment.max_actor_steps,
        stop_at_return=experiment.stop_at_return,
        eval_episodes=experiment.eval_episodes,
        metadata=metadata,
        replay=replay,
        progress_every_seconds=experiment.progress_every_seconds,
        judge_evaluation=experiment.evaluates_periodically))
  if experiment.evaluates_periodically:
    with program.group('evaluator'):
      program.add_node(launch.CourierNode(
          evaluation.PeriodicEvaluator, counter, monitor,
          make_environment, make_eval_actor, variable_source,
          num_episodes=experiment.eval_episodes,
          every_steps=experiment.eval_every_steps,
          every_seconds=experiment.eval_every_seconds))
  return monitor
