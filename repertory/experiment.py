"""What every run shares, whatever the agent: the experiment settings, the
bookkeeping nodes (a step counter, the run monitor, the evaluator) and
`run_experiment`, the Python way to run one.

An agent's `make_program(config, experiment)` adds its own nodes (replay,
learner, actors) and calls `add_counter` and `add_monitor` for the rest.

From Python (any launch type; progress lines print as the run goes)::

  from repertory import experiment
  from repertory.agents import impala
  result = experiment.run_experiment(
      impala.Config(learning_rate=1e-3),
      experiment.ExperimentConfig(agent='impala', env='gym:CartPole-v1',
                                  max_actor_steps=100_000,
                                  launch_type='local_mp'))
  result.results['eval_return_mean']     # results.json as a dict
  result.progress()                      # progress.csv as a DataFrame
  result.evaluations()                   # the evaluation rows only
"""

import contextlib
import dataclasses
import functools
import importlib
import os
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from repertory import core
from repertory import follow
from repertory import launch
from repertory import placement
from repertory import rundir
from repertory.components import checkpointing
from repertory.components import counting
from repertory.components import evaluation
from repertory.components import loggers
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
      numbers written as text become a float or None here. Judged: the
      periodic evaluations' mean returns (`stop_evaluations` in a row)
      when evaluation is on (`eval_every_steps` or `eval_every_seconds`),
      else the mean return of the last 100 training episodes.
    stop_evaluations: how many periodic evaluations in a row must reach
      `stop_at_return` before the run stops (one lucky evaluation of a
      policy that is not yet reliable does not end the run); together they
      must also have played `eval_episodes` episodes, so evaluations cut
      short by `eval_fraction` are judged in longer runs of them.
    eval_episodes: evaluation episodes of each periodic evaluation (at most:
      see `eval_fraction`).
    final_eval_episodes: evaluation episodes played with the final weights
      (at most: see `eval_fraction`).
    eval_every_steps: a greedy evaluation of the learner's weights every
      this many actor steps, by an evaluator node (0: not by steps); the
      weights of that exact step, within one batched actor step.
    eval_every_seconds: ... and/or every this many seconds (0: not by time).
    eval_fraction: evaluation plays at most this share of the training
      steps, in whole episodes (at least one): each periodic evaluation of
      the steps since the previous one, the final one of the budget. Its
      steps are counted apart (`evaluation_steps`), never from the budget.
    seed: base seed; actor i's environment j gets a seed derived from it.
    logdir: where logs, checkpoints and results.json go.
    launch_type: recorded in results.json.
    progress_every_seconds: period of the live progress line.
    checkpoint: when the learner and the replay checkpoint (every agent).
    max_restarts: how many times a crashed actor, evaluator or environment
      worker node is restarted before the program fails.
    restart_learner: restart a crashed learner (up to `max_restarts` times)
      from its latest checkpoint instead of stopping the program.
    share_processes: local_mp: run the replay, counter, monitor and
      evaluator nodes in the learner's process (with `restart_learner`: the
      counter and evaluator in the monitor's), instead of one process each;
      see docs/performance.md.
    actor_processes: local_mp: run the actors in at most this many
      processes, as threads of them (0: one process per CPU core beyond the
      first, which the learner's process keeps; without `share_processes`,
      one per actor); ray: the same when set (0: one per actor).
  """
  agent: str = 'impala'
  env: Union[str, Callable[..., Any]] = 'catch'
  num_actors: int = 2
  envs_per_actor: int = 8
  max_actor_steps: int = 1_000_000
  stop_at_return: Union[float, str, None] = 'auto'
  stop_evaluations: int = 2
  eval_episodes: int = 20
  final_eval_episodes: int = 100
  eval_every_steps: int = 20_000
  eval_every_seconds: float = 0.0
  eval_fraction: float = 0.1
  seed: int = 0
  logdir: str = ''
  launch_type: str = 'local_mt'
  progress_every_seconds: float = 5.0
  checkpoint: checkpointing.CheckpointSettings = dataclasses.field(
      default_factory=checkpointing.CheckpointSettings)
  max_restarts: int = 3
  restart_learner: bool = False
  share_processes: bool = True
  actor_processes: int = 0

  def __post_init__(self):
    for name in ('num_actors', 'envs_per_actor', 'max_actor_steps',
                 'eval_episodes', 'final_eval_episodes', 'stop_evaluations'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}.')
    if self.actor_processes < 0:
      raise ValueError(f'actor_processes={self.actor_processes} must be >= 0 '
                       '(0: one per CPU core beyond the first).')
    if self.max_restarts < 0:
      raise ValueError(f'max_restarts={self.max_restarts} must be >= 0.')
    self.stop_at_return = _stop_at_return(self.stop_at_return, self.env)
    from repertory.environments import registry  # pylint: disable=g-import-not-at-top
    registry.check_reaches_nodes(self.env, self.launch_type)
    if self.eval_every_steps < 0 or self.eval_every_seconds < 0:
      raise ValueError('eval_every_steps and eval_every_seconds must be >= 0, '
                       f'got {self.eval_every_steps} and '
                       f'{self.eval_every_seconds}.')
    if not 0 < self.eval_fraction <= 1:
      raise ValueError('eval_fraction must be in (0, 1], got '
                       f'{self.eval_fraction}.')
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
  from repertory.components import specs  # pylint: disable=g-import-not-at-top
  with contextlib.closing(environments.make(env, seed=0)) as environment:
    return specs.make_environment_spec(environment)


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
                replay: Any = None,
                make_environment: Optional[Callable[[], Any]] = None,
                metadata: Optional[Dict[str, Any]] = None) -> Any:
  """Adds the run monitor (progress, stopping, final evaluation, results)
  and, when `experiment` asks for periodic evaluation, the evaluator node
  (group 'evaluator'). Returns the monitor's handle.

  `make_environment` builds the evaluation environment (default:
  `experiment.env` seeded with `eval_seed`, or the spec its factory names
  as `evaluation_env`, as remote slots name a local copy; the self-play
  agents' is the learner's seat against a random player); `metadata` adds
  to what results.json records of the run."""
  if make_environment is None:
    from repertory import environments  # pylint: disable=g-import-not-at-top
    make_environment = functools.partial(
        environments.make,
        getattr(experiment.env, 'evaluation_env', experiment.env),
        seed=experiment.eval_seed)
  metadata = {
      'agent': experiment.agent,
      'env': env_name(experiment.env),
      'launch_type': experiment.launch_type,
      'num_actors': experiment.num_actors,
      'envs_per_actor': experiment.envs_per_actor,
      'seed': experiment.seed,
      **(metadata or {}),
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
        eval_episodes=experiment.final_eval_episodes,
        eval_fraction=experiment.eval_fraction,
        metadata=metadata,
        replay=replay,
        progress_every_seconds=experiment.progress_every_seconds,
        judge_evaluation=experiment.evaluates_periodically,
        stop_evaluations=experiment.stop_evaluations,
        stop_episodes=experiment.eval_episodes,
        eval_every_steps=(experiment.eval_every_steps
                          if experiment.evaluates_periodically else 0)))
  if experiment.evaluates_periodically:
    with program.group('evaluator'):
      program.add_node(launch.CourierNode(
          evaluation.PeriodicEvaluator, counter, monitor,
          make_environment, make_eval_actor, variable_source,
          num_episodes=experiment.eval_episodes,
          every_steps=experiment.eval_every_steps,
          every_seconds=experiment.eval_every_seconds,
          eval_fraction=experiment.eval_fraction))
  return monitor


@dataclasses.dataclass
class RunResult:
  """What `run_experiment` returns: the run directory and its results."""
  logdir: str
  results: Dict[str, Any]

  def progress(self) -> Any:
    """`progress.csv` (progress rows and evaluation rows) as a DataFrame."""
    import pandas as pd  # pylint: disable=g-import-not-at-top
    return pd.read_csv(os.path.join(self.logdir, 'progress.csv'))

  def evaluations(self) -> Any:
    """The evaluation rows of `progress.csv` (periodic, then the final)."""
    progress = self.progress()
    if 'eval_return_mean' not in progress:
      return progress.iloc[0:0]
    return progress[progress['eval_return_mean'].notna()].reset_index(
        drop=True)


def _agent_module(agent_config: Any) -> Any:
  """The module with `make_program` for an agent's `Config`: the Config's
  own module, else its package (repertory.agents.impala for
  repertory.agents.impala.config.Config)."""
  name = type(agent_config).__module__
  for candidate in (name, name.rpartition('.')[0]):
    if candidate:
      module = importlib.import_module(candidate)
      if hasattr(module, 'make_program'):
        return module
  raise ValueError(f'No make_program next to {type(agent_config).__name__} '
                   f'({name}); pass the program to run_experiment.')


def run_experiment(agent_config: Any, experiment: ExperimentConfig,
                   program: Optional[launch.Program] = None,
                   max_restarts: Optional[Mapping[str, int]] = None,
                   on_progress: Optional[Callable[[Dict[str, Any]],
                                                  None]] = None,
                   argv: Optional[List[str]] = None) -> RunResult:
  """Runs one experiment to its end in `experiment.launch_type`; returns its
  results. `python -m repertory.run` runs this same function.

  Before any node starts, the run directory is checked and, when it holds
  the run, resumed (`repertory.rundir.preflight`: settings, budget, each
  damaged part named in one line; `rundir.RunDirError` if it cannot be
  used); the nodes share processes as `experiment` asks
  (`repertory.placement`). Writes `config.json`, an attempt record, the node
  logs (`nodes/`), progress and results into `experiment.logdir`; shows the
  run's progress as it goes: a bar with the share of the budget and an ETA
  when stderr is a terminal, else the monitor's lines on stdout.

  Args:
    agent_config: the agent's `Config`.
    experiment: the run's settings (`agent` names a registered agent).
    program: the program to launch (default: the agent's
      `make_program(agent_config, experiment)`).
    max_restarts: group -> restarts of a crashed node (default:
      `placement.max_restarts`, from `experiment.max_restarts`).
    on_progress: called with each row the run adds to `progress.csv` (a
      dict: progress rows and evaluation rows), from this process, as the
      run goes.
    argv: the command line recorded in the attempt (default: `sys.argv`).

  Raises:
    rundir.RunDirError: the run directory cannot be used (one line).
    The exception of a node that failed (its class is also a
    `launch.NodeError`; `launch.errors.one_line(e)` describes it in a line).
    RuntimeError: if the run ended without results.json.
  """
  if program is None:
    program = _agent_module(agent_config).make_program(agent_config,
                                                       experiment)
  placement.place(program, experiment)
  if max_restarts is None:
    max_restarts = placement.max_restarts(program, experiment)
  warnings = [rundir.oversubscription(
      experiment.num_actors, experiment.envs_per_actor,
      experiment.launch_type, processes=placement.actor_units(program))]
  for warning in filter(None, warnings):  # Before the refusals.
    print(f'repertory: warning: {warning}', file=sys.stderr, flush=True)
  resuming, warnings = rundir.preflight_run(agent_config, experiment)
  for warning in warnings:
    print(f'repertory: warning: {warning}', file=sys.stderr, flush=True)
  counts = rundir.saved_counts(experiment.logdir) or {}
  attempt = rundir.start_attempt(
      experiment.logdir, rundir.saved_config(agent_config, experiment), argv)
  print(f'repertory: {experiment.agent} on {env_name(experiment.env)}, '
        f'{experiment.num_actors} actors x {experiment.envs_per_actor} envs, '
        f'launch type {experiment.launch_type}; logs in {experiment.logdir}'
        + (' (resuming the run there)' if resuming else ''), flush=True)
  if resuming:
    print(rundir.resumed_at(experiment.logdir) or '', flush=True)
  display = loggers.ProgressDisplay(
      experiment.max_actor_steps, initial=int(counts.get('actor_steps', 0)))
  follower = follow.Follower(experiment.logdir, display.show, on_progress)
  follower.start()
  try:
    with monitor_lib.lines_shown_elsewhere():
      launch.launch(program, launch_type=experiment.launch_type,
                    logdir=os.path.join(experiment.logdir, 'nodes'),
                    max_restarts=dict(max_restarts), block=True)
  finally:
    follower.stop()
    display.close()
    results = attempt.end()  # This attempt's record (repertory/rundir).
  path = os.path.join(experiment.logdir, 'results.json')
  if results is None and not os.path.exists(path):
    raise RuntimeError(f'The run ended without writing {path}; see the node '
                       f'logs in {os.path.join(experiment.logdir, "nodes")}.')
  return RunResult(experiment.logdir,
                   results if results is not None else rundir.read_json(path))
