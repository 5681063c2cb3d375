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
import json
import os
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Union

from repertory import core
from repertory import launch
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
      policy that is not yet reliable does not end the run).
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

  def __post_init__(self):
    for name in ('num_actors', 'envs_per_actor', 'max_actor_steps',
                 'eval_episodes', 'final_eval_episodes', 'stop_evaluations'):
      if getattr(self, name) < 1:
        raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}.')
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
  `experiment.env` seeded with `eval_seed`; the self-play agents' is the
  learner's seat against a random player); `metadata` adds to what
  results.json records of the run."""
  if make_environment is None:
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
        stop_evaluations=experiment.stop_evaluations))
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


def save_config(agent_config: Any, experiment: ExperimentConfig) -> dict:
  """Writes `<logdir>/config.json` (what a resumed run is checked against);
  returns what it wrote."""
  saved = {'agent': dataclasses.asdict(agent_config),
           'experiment': dataclasses.asdict(experiment)}
  os.makedirs(experiment.logdir, exist_ok=True)
  with open(os.path.join(experiment.logdir, 'config.json'), 'w') as f:
    json.dump(saved, f, indent=2, default=str)
  return saved


def _tail(path: str, stop: threading.Event, show: Callable[[str], None],
          start: int) -> None:
  """Shows each line appended to `path` (the monitor's progress, written in
  any process) after byte `start`, until `stop` is set and the file is read
  to its end."""
  position, partial = start, ''
  while True:
    stopping = stop.wait(0.5)
    if os.path.exists(path):
      with open(path) as f:
        f.seek(position)
        text = f.read()
        position = f.tell()
      *lines, partial = (partial + text).split('\n')
      for line in lines:
        show(line)
    if stopping:
      return


def resumed_at(logdir: str) -> Optional[str]:
  """'Resumed at actor_steps=..., learner_steps=... in <logdir>.' when
  `logdir` holds saved counts (a resumed run), else None."""
  counts = saved_counts(logdir)
  if counts is None:
    return None
  steps = ', '.join(f'{k}={int(v)}' for k, v in sorted(counts.items())
                    if k in ('actor_steps', 'learner_steps'))
  return f'Resumed at {steps or "the start (no steps counted)"} in {logdir}.'


def saved_counts(logdir: str) -> Optional[Dict[str, float]]:
  """`<logdir>/counts.json` (the counter's saved counts), if any."""
  path = os.path.join(logdir, 'counts.json')
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


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
                   write_config: bool = True) -> RunResult:
  """Runs one experiment to its end in `experiment.launch_type`; returns its
  results.

  Writes `config.json`, the node logs (`nodes/`), progress and results into
  `experiment.logdir`; shows the run's progress as it goes, in every launch
  type: a bar with the share of the budget and an ETA when stderr is a
  terminal, else the monitor's lines on stdout. A resumed run (its logdir
  holds counts) first prints "Resumed at ...".

  Args:
    agent_config: the agent's `Config`.
    experiment: the run's settings (`agent` names a registered agent).
    program: the program to launch (default: the agent's
      `make_program(agent_config, experiment)`).
    max_restarts: group -> restarts of a crashed node (default: 3 for the
      actors and the evaluator).
    write_config: write config.json (the command line writes it itself).

  Raises:
    The exception of a node that failed (its class is also a
    `launch.NodeError`; `launch.errors.one_line(e)` describes it in a line).
    RuntimeError: if the run ended without results.json.
  """
  if program is None:
    program = _agent_module(agent_config).make_program(agent_config,
                                                       experiment)
  if write_config:
    save_config(agent_config, experiment)
  os.makedirs(experiment.logdir, exist_ok=True)
  if max_restarts is None:
    max_restarts = {g: 3 for g in ('actor', 'evaluator', 'environment')
                    if g in program.groups}
  resumed = resumed_at(experiment.logdir)
  if resumed:
    print(resumed, flush=True)
  # This run's own progress lines (a resumed run's log goes on from the
  # previous ones), in every launch type: a bar on a terminal, else lines.
  log = os.path.join(experiment.logdir, 'progress.log')
  start = os.path.getsize(log) if os.path.exists(log) else 0
  display = loggers.ProgressDisplay(
      experiment.max_actor_steps,
      initial=int((saved_counts(experiment.logdir) or {}).get(
          'actor_steps', 0)))
  stop_tail = threading.Event()
  tail = threading.Thread(target=_tail, daemon=True,
                          args=(log, stop_tail, display.show, start))
  tail.start()
  try:
    with monitor_lib.lines_shown_elsewhere():
      launch.launch(program, launch_type=experiment.launch_type,
                    logdir=os.path.join(experiment.logdir, 'nodes'),
                    max_restarts=dict(max_restarts), block=True)
  finally:
    stop_tail.set()
    tail.join(timeout=10)
    display.close()
  path = os.path.join(experiment.logdir, 'results.json')
  if not os.path.exists(path):
    raise RuntimeError(f'The run ended without writing {path}; see the node '
                       f'logs in {os.path.join(experiment.logdir, "nodes")}.')
  with open(path) as f:
    return RunResult(experiment.logdir, json.load(f))
