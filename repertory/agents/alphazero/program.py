"""The AlphaZero program graph.

 actor/i --PositionAdder (after each game)--> replay (uniform, positions) --> learner
   ^---- the learner's newest weights (VariableClient, before each game) ----'
 actors --> counter (positions, games)    monitor (greedy network vs random)

Each actor (`acting.SearchSelfPlayActor`) plays both seats of its games
with network-guided search; the replay's `SampleToInsertRatio` keeps the
learner at `samples_per_insert` samples per position.
"""

import contextlib
import functools
from typing import Any

import numpy as np

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents.alphazero import config as config_lib
from repertory.agents.alphazero import learning
from repertory.components import adders
from repertory.components import league
from repertory.components import networks
from repertory.components import replay as replay_lib
from repertory.agents.alphazero import acting
from repertory.components import search
from repertory.environments import multiagent


def game_spec(env: Any) -> multiagent.PlayerSpec:
  """One player's spec; refuses games that search cannot play."""
  with contextlib.closing(environments.make(env, seed=0)) as game:
    if not hasattr(game, 'observe'):
      raise ValueError(
          f'The alphazero agent plays OpenSpiel games (openspiel:<game>, e.g. '
          f'openspiel:connect_four/relative); {env!r} is not one.')
    search.check_game(game.game)
    return multiagent.player_spec(game)


def make_tables(config: config_lib.Config, spec: Any) -> list:
  """The replay of positions (uniform sampling, oldest out first)."""
  num_actions = int(spec.actions.num_values)
  example = {
      'observation': np.zeros(spec.observations['observation'].shape,
                              np.float32),
      'legal_actions': np.zeros((num_actions,), np.float32),
      'search_policy': np.zeros((num_actions,), np.float32),
      'outcome': np.float32(0.0)}
  return [replay_lib.uniform_replay_table(
      config_lib.TABLE, config.replay_size,
      adders.position_signature(example),
      min_size_to_sample=config.min_replay_size,
      samples_per_insert=config.samples_per_insert,
      batch_size=config.batch_size)]


def make_program(config: config_lib.Config,
                 experiment: experiment_lib.ExperimentConfig
                 ) -> launch.Program:
  """replay, counter, learner, monitor, actors."""
  spec = game_spec(experiment.env)
  networks.check_board_planes(config.conv_channels,
                              spec.observations['observation'].shape,
                              repr(experiment.env))
  program = launch.Program('alphazero')
  with program.group('replay'):
    replay = program.add_node(launch.ReverbNode(
        functools.partial(make_tables, config, spec)))
  counter = experiment_lib.add_counter(program, experiment.logdir)
  with program.group('learner'):
    learner = program.add_node(launch.CourierNode(
        learning.make_learner, config, spec, replay, counter,
        experiment.logdir, experiment.seed, experiment.checkpoint))
  monitor = experiment_lib.add_monitor(
      program, experiment, counter, learner, league.EvalActor, replay=replay,
      make_environment=functools.partial(
          league.against_random, experiment.env, experiment.eval_seed),
      metadata={'simulations': config.simulations})
  with program.group('actor'):
    for i in range(experiment.num_actors):
      program.add_node(launch.PyClassNode(
          acting.SearchSelfPlayActor, experiment.env, learner, replay,
          config_lib.TABLE, simulations=config.simulations,
          uct_c=config.uct_c, dirichlet_alpha=config.dirichlet_alpha,
          dirichlet_epsilon=config.dirichlet_epsilon,
          temperature_moves=config.temperature_moves,
          variable_update_period=config.variable_update_period,
          variable_name=config_lib.POLICY, actor_id=i,
          seed=experiment.actor_seed(i), counter=counter, monitor=monitor))
  return program
