"""The self-play program graph.

 actor/i --SequenceAdder (per-player trajectories)--> replay (queue) --> learner
   ^  ^-- opponents' weights, per snapshot id ---- league <-- snapshots --'
   '----- the learner's weights (VariableClient) ------------------------'
 actors --> league.report (payoffs, Elo)   counter, monitor (eval vs random)

With `inference='server'` (SEED-style) an `InferenceServer` node (group
'inference') plays the learner's weights and every opponent snapshot (from
the league) for all actors, which step games and write trajectories.

With `num_exploiters=N`, N main exploiters (AlphaStar) run beside the main
agent, each its own learner (group 'exploiter_learner', league name
'exploiter<k>'), queue (table 'trajectories_exploiter<k>' on the same Reverb
node) and `exploiter_actors` actors (group 'exploiter_actor', playing
locally in both inference modes) that meet only the main agent's newest
snapshot; their snapshots join the pool that the main agent's matchmaking
samples:

 exploiter_actor/k.i --> replay[trajectories_exploiter<k>] --> exploiter_learner/k
      ^-- main's newest snapshot (league) ; exploiter<k>@v.. snapshots --> league
"""

import contextlib
import functools
import os
from typing import Any

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.selfplay import acting
from repertory.agents.selfplay import config as config_lib
from repertory.agents.selfplay import learning
from repertory.agents.selfplay import networks as networks_lib
from repertory.components import adders
from repertory.components import inference
from repertory.components import league as league_lib
from repertory.components import networks
from repertory.components import replay as replay_lib
from repertory.agents.actor_critic import lstm_policy
from repertory.environments import multiagent


def game_specs(env: Any, config: config_lib.Config):
  """(one player's spec, the most moves one player makes in a game)."""
  with contextlib.closing(environments.make(env, seed=0)) as game:
    if not isinstance(game, multiagent.MultiAgentEnvironment):
      raise ValueError(
          f'The selfplay agent plays N-player games (openspiel:<game>, '
          f'pettingzoo:<family>.<game>); {env!r} is a single-agent '
          'environment.')
    if game.simultaneous:
      raise ValueError(f'The selfplay agent plays turn-based games; {env!r} '
                       'is simultaneous.')
    steps = config.max_player_steps
    if steps is None:
      if not hasattr(game, 'game'):
        raise ValueError(f'{env!r} does not say how long a game lasts: set '
                         '--config.max_player_steps.')
      steps = game.game.max_game_length()
    return multiagent.player_spec(game), int(steps)


def league_identity(config: config_lib.Config,
                    experiment: experiment_lib.ExperimentConfig) -> dict:
  """What makes a league directory this run's: a league of another game or
  network in the run directory is refused, not replaced."""
  env = experiment.env  # A factory by its name (a repr holds addresses).
  if not isinstance(env, str):
    env = getattr(env, '__qualname__', type(env).__name__)
  identity = {'env': env, 'hidden_sizes': list(config.hidden_sizes)}
  if config.conv_channels:
    identity['conv_channels'] = list(config.conv_channels)
  return identity


def make_tables(config: config_lib.Config, spec: Any, length: int) -> list:
  """One queue per learner: the main agent's, then each exploiter's (items
  of `length` steps; with `use_lstm`, the core state at the first)."""
  signature = adders.sequence_signature(
      spec, length, extras_spec={'log_prob': spec.rewards},
      core_state_spec=acting.core_state_spec(config))
  learners = [config_lib.MAIN] + config_lib.exploiter_names(config)
  return [replay_lib.queue_table(config_lib.table_name(learner),
                                 config.max_queue_size, signature,
                                 batch_size=config.batch_size)
          for learner in learners]


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """replay, counter, league, learner, monitor, [inference], actors,
  [exploiter learners and actors]."""
  config_lib.check_exploiters(config)
  config_lib.check_network(config)
  league_lib.check_architecture(os.path.join(experiment.logdir, 'league'),
                                config_lib.architecture(config))
  spec, max_player_steps = game_specs(experiment.env, config)
  networks.check_board_planes(config.conv_channels,
                              spec.observations['observation'].shape,
                              repr(experiment.env))
  program = launch.Program('selfplay')
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(functools.partial(
        make_tables, config, spec,
        config_lib.unroll_steps(config, max_player_steps) + 1)))
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('league'):
    league = program.add_node(launch.CourierNode(
        league_lib.League, os.path.join(experiment.logdir, 'league'),
        functools.partial(networks_lib.network_for, spec, config),
        matchmaking=config.matchmaking,
        snapshot_every_steps=config.snapshot_every_steps,
        snapshot_win_rate=config.snapshot_win_rate,
        min_games=config.min_games, max_snapshots=config.max_snapshots,
        elo_k=config.elo_k, exploiter_win_rate=config.exploiter_win_rate,
        exploiter_reset_steps=config.exploiter_reset_steps,
        seed=experiment.seed, architecture=config_lib.architecture(config),
        identity=league_identity(config, experiment)))
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        learning.SelfPlayLearner, config, spec, replay, counter, league,
        experiment.logdir, num_actors=experiment.num_actors))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner,
      functools.partial(league_lib.EvalActor, make_lstm_policy=(
          functools.partial(lstm_policy.LSTMPolicy, config.lstm_size)
          if config.use_lstm else None)), replay=replay,
      make_environment=functools.partial(
          league_lib.against_random, experiment.env, experiment.eval_seed),
      metadata={'matchmaking': config.matchmaking,
                'policy_loss': config.policy_loss,
                'inference': config.inference})
  server = None
  if config.inference == 'server':
    with program.group('inference'):
      server = program.add_node(launch.CourierNode(
          inference.InferenceServer,
          make_policy=functools.partial(league_lib.ServedPolicy,
                                        config.exploration),
          variable_source=learner, replay=None, table=config_lib.TABLE,
          unroll_length=1, envs_per_actor=experiment.envs_per_actor,
          max_batch_size=experiment.num_actors,
          variable_update_period=config.variable_update_period,
          variable_name=config_lib.POLICY, seed=experiment.seed,
          opponents=league,
          make_opponent_policy=league_lib.ServedPolicy, return_extras=True))
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.PyClassNode(
          acting.SelfPlayActor, config, experiment.env,
          experiment.envs_per_actor, max_player_steps, i,
          experiment.actor_seed(i) * 1000 + i, learner, league, replay,
          counter, monitor, experiment.logdir, server=server))
  add_exploiters(program, config, experiment, spec, max_player_steps, replay,
                 counter, league)
  return program


def add_exploiters(program: launch.Program, config: config_lib.Config,
                   experiment: experiment_lib.ExperimentConfig, spec: Any,
                   max_player_steps: int, replay: Any, counter: Any,
                   league: Any) -> None:
  """Each exploiter's learner (logs and checkpoints under
  `<logdir>/<exploiter>`) and its actors (no run monitor: the run's
  evaluation and returns are the main agent's)."""
  num_actors = config.exploiter_actors or experiment.num_actors
  for k, name in enumerate(config_lib.exploiter_names(config)):
    with program.group('exploiter_learner'):
      learner = program.add_node(launch.CourierNode(
          learning.SelfPlayLearner, config, spec, replay, counter, league,
          os.path.join(experiment.logdir, name) if experiment.logdir
          else None, role=name, num_actors=num_actors))
    with program.group('exploiter_actor'):
      for i in range(num_actors):
        seed = experiment.actor_seed(experiment.num_actors +
                                     k * num_actors + i)
        program.add_node(launch.PyClassNode(
            acting.SelfPlayActor, config, experiment.env,
            experiment.envs_per_actor, max_player_steps, i,
            seed * 1000 + i, learner, league, replay, counter, None,
            experiment.logdir, role=name))
