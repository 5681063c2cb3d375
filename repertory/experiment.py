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
from repertory.components import checkpointing
from repertory.components import counting
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
    stop_at_return: stop earlier once the mean return of the last 100
      training episodes reaches this (None: run the whole budget).
    eval_episodes: evaluation episodes played with the final weights.
    seed: base seed; actor i's environment j gets a seed derived from it.
    logdir: where logs, checkpoints and results.json go.
    launch_type: recorded in results.json.
    progress_every_seconds: period of the live progress line.
    checkpoint: when the learner and the replay checkpoint (every agent).
  """
  agent: str = 'impala'
  env: Union[str, Callable[..., Any]] = 'catch'
  num_actors: int = 2
  envs_per_actor: int = 8
  max_actor_steps: int = 1_000_000
  stop_at_return: Optional[float] = None
  eval_episodes: int = 20
  seed: int = 0
  logdir: str = ''
  launch_type: str = 'local_mt'
  progress_every_seconds: float = 5.0
  checkpoint: checkpointing.CheckpointSettings = dataclasses.field(
      default_factory=checkpointing.CheckpointSettings)

  def __post_init__(self):
    for name in ('num_actors', 'envs_per_actor', 'max_actor_steps',
                 'eval_episodes'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}.')
    if not self.logdir:
      stamp = time.strftime('%Y%m%d-%H%M%S')
      self.logdir = os.path.join('runs', f'{self.agent}-{stamp}')

  def actor_seed(self, actor_id: int) -> int:
    """The seed of actor `actor_id`'s first environment (the rest follow)."""
    return self.seed * 1_000_003 + actor_id * self.envs_per_actor

  @property
  def eval_seed(self) -> int:
    return self.seed * 1_000_003 + 999_983


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
  """Adds the run monitor (progress, stopping, final evaluation, results)."""
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
    return program.add_node(launch.CourierNode(
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
        progress_every_seconds=experiment.progress_every_seconds))
