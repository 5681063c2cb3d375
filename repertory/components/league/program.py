"""A league around any agent: the agent's own program graph, playing one seat
of a two-player game against snapshots of itself.

    program = league.make_program(impala.make_program, config, experiment,
                                  matchmaking='pfsp')

is what `python -m repertory.run --agent=impala --env=openspiel:kuhn_poker
--league=pfsp` launches:

 actor/i (the agent's own) --> LeagueSeat: the seat's flat view; the other
   seat played by a snapshot, picked per episode --.   --> the agent's queue
        ^                                           |       and learner
        '-- opponents, snapshots' weights -- league <-- the learner's weights
   league <-- finished games (payoffs, Elo)              (by version)

The agent's program is built unchanged with `experiment.env` replaced by a
`LeagueGame` (opponents.py); the league learns from the agent's run monitor
which evaluation actor plays its policy (the league plays snapshots with
it) and which node is its learner (snapshots are the groups that actor
reads, fetched by version). The run monitor and the evaluator then evaluate
the alternating seat against a uniformly random player, at least
`MIN_EVAL_GAMES` games each time. On a game small enough to traverse
(Kuhn poker, Leduc poker: `exploitability.check_game`), the league node
also computes OpenSpiel's exploitability of the newest snapshot and of the
pool's average policy after each snapshot, and the run monitor reports
them as evaluation rows (`exploitability`, `exploitability_pool`, and
the anchored rating `elo_anchored`); on any other game it rates each new
snapshot from sampled games against the pool's (`sampled_rating.py`,
`elo_anchored`).
"""

import contextlib
import dataclasses
import functools
import os
from typing import Any, Callable, Optional, Tuple

from repertory import environments
from repertory import launch
from repertory.components.evaluation import evaluator as evaluator_lib
from repertory.components.evaluation import monitor as monitor_lib
from repertory.components.league import exploitability as exploitability_lib
from repertory.components.league import exploiters as exploiters_lib
from repertory.components.league import league as league_lib
from repertory.components.league import matchmaking as matchmaking_lib
from repertory.components.league import node as node_lib
from repertory.components.league import opponents
from repertory.components.league import sampled_rating
from repertory.components.league import storage
from repertory.environments import multiagent
from repertory.environments.multiagent import seat as seat_lib

RULES = (*matchmaking_lib.RULES, *matchmaking_lib.MAIN_RULES)
# Versions between snapshots unless set: with 'latest' the opponent is the
# newest snapshot, so this is how far it lags behind the learner (naive
# self-play wants it close); other rules sample a pool that this spreads.
SNAPSHOT_EVERY_VERSIONS = {'latest': 20}
DEFAULT_SNAPSHOT_EVERY_VERSIONS = 200
# Games every evaluation of a league run plays at least (half in each seat):
# enough that a 95% interval of the mean return excludes chance when the
# policy is clearly better than random.
MIN_EVAL_GAMES = 2000


def check_game(env: Any) -> None:
  """Refuses (one line) what a league cannot seat an agent in: anything but
  a turn-based two-player game."""
  with contextlib.closing(environments.make(env, seed=0)) as game:
    if not isinstance(game, multiagent.MultiAgentEnvironment):
      raise ValueError(f'A league plays two-player games (openspiel:<game>, '
                       f'pettingzoo:<family>.<game>); {env!r} is a '
                       'single-agent environment.')
    if game.simultaneous or game.num_players != 2:
      raise ValueError(f'A league plays turn-based two-player games; {env!r} '
                       f'has {game.num_players} players'
                       f'{" moving at once" if game.simultaneous else ""}.')


def against_random(env: Any, seed: int) -> seat_lib.SeatEnvironment:
  """The alternating seat of game `env` against a uniformly random player,
  as the agent sees it (flat views)."""
  return seat_lib.RandomSeat(environments.make(env, seed=seed), seed)


def _monitor(program: launch.Program) -> launch.PyClassNode:
  monitors = [n for n in program.groups.get('monitor', [])
              if getattr(n, '_ctor', None) is monitor_lib.RunMonitor]
  if len(monitors) != 1:
    raise ValueError(
        f'A league needs the agent program to have one run monitor '
        f'(experiment.add_monitor), to know its learner and evaluation '
        f'actor; {program.name!r} has {len(monitors)}.')
  return monitors[0]


def make_program(make_agent_program: Callable[..., launch.Program],
                 config: Any, experiment: Any, matchmaking: str = 'pfsp',
                 snapshot_every_versions: Optional[int] = None,
                 max_snapshots: int = 1000,
                 exploitability: Optional[bool] = None,
                 exploiters: int = 0, exploiter_win_rate: float = 0.7,
                 exploiter_reset_steps: Optional[int] = None,
                 exploiter_min_games: int = 100,
                 rated_games: int = sampled_rating.GAMES_PER_OPPONENT,
                 **program_kwargs: Any) -> launch.Program:
  """The agent's program (`make_agent_program(config, experiment,
  **program_kwargs)`) in a league on the game `experiment.env`.

  Args:
    make_agent_program: the agent's `make_program`.
    config: the agent's config.
    experiment: an `ExperimentConfig` whose `env` is a two-player game.
    matchmaking: a rule of `RULES`.
    snapshot_every_versions: see `LeagueNode`; None: 20 with 'latest'
      (`SNAPSHOT_EVERY_VERSIONS`), else 200.
    max_snapshots: see `LeagueNode`.
    exploitability: compute the exploitability of the newest snapshot and
      of the pool's average (None: where the game allows it; True: refuse
      a game that does not).
    exploiters: main exploiters to add (exploiters.py): each the agent's
      learner again with its own queue or replay and actors, playing main's
      newest snapshot; not with 'latest'.
    exploiter_win_rate, exploiter_reset_steps, exploiter_min_games: when an
      exploiter's generation ends (its mean score against main since its
      reset, after `exploiter_min_games` games, or its learner's steps; see
      `League`).
    rated_games: where no exploitability is computed, each new snapshot
      plays this many games against each of up to 8 rated snapshots for
      its anchored rating (`sampled_rating.py`); 0: no rating.

  Raises:
    ValueError (one line, before anything is written): an unknown rule, a
      game a league cannot play, a league directory it cannot continue,
      `exploitability=True` on a game without one.
  """
  if matchmaking not in RULES:
    raise ValueError(f'--league={matchmaking!r}; choose one of '
                     f'{", ".join(RULES)}.')
  exploiters_lib.check(exploiters, matchmaking)
  league_lib.League.check_exploiter_settings(exploiter_win_rate,
                                             exploiter_reset_steps)
  check_game(experiment.env)
  if snapshot_every_versions is None:
    snapshot_every_versions = SNAPSHOT_EVERY_VERSIONS.get(
        matchmaking, DEFAULT_SNAPSHOT_EVERY_VERSIONS)
  if exploitability:
    reason = exploitability_lib.check_game(experiment.env)
    if reason:
      raise ValueError(f'--league_exploitability: {reason}.')
  elif exploitability is None:
    exploitability = exploitability_lib.applies(experiment.env)
  if rated_games < 0 or rated_games == 1:
    raise ValueError(f'--league_rated_games={rated_games}: expected 0 (no '
                     'rating) or at least 2 (one game in each seat).')
  rating_game = (experiment.env if rated_games and not exploitability
                 else None)
  directory = os.path.join(experiment.logdir, 'league')
  storage.check_directory(directory, resumed=os.path.exists(
      os.path.join(experiment.logdir, 'counts.json')))
  league = launch.CourierNode(node_lib.LeagueNode)
  game = opponents.LeagueGame(experiment.env, league.create_handle())
  program = make_agent_program(
      config, dataclasses.replace(experiment, env=game), **program_kwargs)
  make_eval_actor, learner = _evaluate_against_random(
      program, experiment, matchmaking,
      league.create_handle() if exploitability or rating_game else None)
  game.make_eval_actor = make_eval_actor
  exploiter_learners = exploiters_lib.add(
      program, make_agent_program, config, experiment,
      league.create_handle(), exploiters, **program_kwargs)
  league.configure(directory, learner, make_eval_actor,
                   matchmaking=matchmaking,
                   snapshot_every_versions=snapshot_every_versions,
                   max_snapshots=max_snapshots, seed=experiment.seed,
                   logdir=experiment.logdir,
                   exploitability=experiment.env if exploitability else None,
                   exploiters=exploiter_learners,
                   exploiter_win_rate=exploiter_win_rate,
                   exploiter_reset_steps=exploiter_reset_steps,
                   min_games=exploiter_min_games,
                   activation=getattr(config, 'activation', 'relu'),
                   rating_game=rating_game, rated_games=rated_games)
  with program.group('league'):
    program.add_node(league)
  return program


def _evaluate_against_random(program: launch.Program, experiment: Any,
                             matchmaking: str, metrics_source: Any
                             ) -> Tuple[Any, Any]:
  """Points the agent's run monitor and periodic evaluator at games against
  uniform random play (both seats, at least `MIN_EVAL_GAMES`); returns the
  agent's (make_eval_actor, learner handle)."""
  monitor = _monitor(program)
  args, kwargs = monitor.arguments()
  evaluation = functools.partial(against_random, experiment.env,
                                 experiment.eval_seed)
  metadata = dict(kwargs.get('metadata') or {}, league=matchmaking,
                  env=environments_name(experiment.env))
  # Games, not a share of the budget: chance is excluded only over enough.
  games = max(kwargs.get('eval_episodes') or 0, MIN_EVAL_GAMES)
  monitor.configure(*args, **dict(
      kwargs, make_environment=evaluation, metadata=metadata,
      eval_episodes=games, eval_fraction=None, metrics_source=metrics_source))
  for node in program.groups.get('evaluator', []):
    if getattr(node, '_ctor', None) is evaluator_lib.PeriodicEvaluator:
      node_args, node_kwargs = node.arguments()
      node.configure(*(node_args[:2] + (evaluation,) + node_args[3:]),
                     **dict(node_kwargs, num_episodes=games,
                            eval_fraction=None))
  return kwargs['make_eval_actor'], kwargs['variable_source']


def environments_name(env: Any) -> str:
  return env if isinstance(env, str) else getattr(
      env, '__qualname__', type(env).__name__)
