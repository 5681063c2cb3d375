"""`--agent=selfplay --config.use_lstm=true`: IMPALA's LSTM
network in self-play. The variant trains in test_mt on Kuhn poker (main
exploiters too); the core state stored at an item's first step (read from
a real Reverb table) is the LSTM state of the player's earlier turns,
recomputed from OpenSpiel's history; the recurrent V-trace loss equals a
step-by-step reference; a league snapshot is rebuilt with the LSTM and
plays legal actions only; options that cannot apply are refused in one
line."""

import csv
import os
import time

import numpy as np
import pytest
import reverb

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import selfplay
from repertory.agents.selfplay import acting
from repertory.agents.selfplay import config as config_lib
from repertory.agents.selfplay import networks as networks_lib
from repertory.agents.selfplay import program as program_lib
from repertory.components import league as league_lib
from repertory.components import networks
from repertory.components import variables
from repertory.agents.actor_critic import lstm_policy
from repertory.environments.multiagent import openspiel_policy

GAME = 'openspiel:kuhn_poker'
_MID = 1  # dm_env.StepType.MID


def _config(**overrides):
  settings = dict(policy_loss='vtrace', inference='local', matchmaking='pfsp',
                  use_lstm=True, lstm_size=16, hidden_sizes=(32,),
                  unroll_length=1, batch_size=16, snapshot_every_steps=5)
  settings.update(overrides)
  return selfplay.Config(**settings)


def _lstm_network(config, seed):
  spec, _ = program_lib.game_specs(GAME, config)
  with networks.seeded(seed):
    return networks_lib.network_for(spec, config), spec


def _league(directory, config, spec):
  return league_lib.League(
      directory, lambda: networks_lib.network_for(spec, config),
      matchmaking=config.matchmaking, snapshot_every_steps=5,
      architecture=config_lib.architecture(config))


def test_lstm_variant_trains_in_test_mt(tmp_path):
  config = _config()
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=GAME, num_actors=1, envs_per_actor=8,
      max_actor_steps=10**9, logdir=str(tmp_path), launch_type='test_mt')
  program = selfplay.make_program(config, experiment)
  launched = launch.launch(program, launch_type='test_mt')
  try:
    learner = program.groups['learner'][0].create_handle().dereference()
    league = program.groups['league'][0].create_handle().dereference()
    first = learner.get_variables(['policy'])
    deadline = time.monotonic() + 120
    while (learner.get_variables(['policy']).version < 30 and
           time.monotonic() < deadline):
      time.sleep(0.2)
    last = learner.get_variables(['policy'])
    players = league.players()
  finally:
    launched.stop(timeout=60)
  assert last.version >= 30
  before, after = first.variables[0], last.variables[0]
  assert 'core/lstm/w_i' in after  # IMPALA's LSTM network is what trains.
  assert not np.allclose(before['core/lstm/w_i'], after['core/lstm/w_i'])
  assert len(players) >= 2
  assert all(p['architecture'] == config_lib.architecture(config)
             for p in players)
  with open(os.path.join(tmp_path, 'games', 'actor_0.csv')) as f:
    opponents = {r['opponent'] for r in csv.DictReader(f)}
  # The actor met LSTM snapshots of the pool.
  assert opponents & {p['id'] for p in players}


def test_lstm_exploiters_reset_and_join_the_pool(tmp_path):
  config = _config(num_exploiters=1, exploiter_reset_steps=10)
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=GAME, num_actors=1, envs_per_actor=8,
      max_actor_steps=10**9, logdir=str(tmp_path), launch_type='test_mt')
  program = selfplay.make_program(config, experiment)
  launched = launch.launch(program, launch_type='test_mt')
  try:
    league = program.groups['league'][0].create_handle().dereference()
    deadline = time.monotonic() + 120
    while (league.summary().get('league/exploiter0/resets', 0) < 2 and
           time.monotonic() < deadline):
      time.sleep(0.2)
    summary, players = league.summary(), league.players()
  finally:
    launched.stop(timeout=60)
  assert summary['league/exploiter0/resets'] >= 2
  exploiters = [p for p in players if p['role'] == 'exploiter']
  assert len(exploiters) >= 2
  assert all(p['architecture']['network'] == 'lstm_policy_value'
             for p in players)


def _by_information_state(game):
  """{(player, information-state tensor): an OpenSpiel state there}."""
  table = openspiel_policy.policy_lib.TabularPolicy(game)
  return {(s.current_player(), tuple(np.asarray(
      s.information_state_tensor(s.current_player()), np.float32))): s
          for s in table.states}


def test_stored_core_state_is_the_players_state_there(tmp_path):
  import pyspiel  # pylint: disable=g-import-not-at-top
  config = _config()
  network, spec = _lstm_network(config, seed=3)
  weights = networks.get_variables(network)
  program = launch.Program('league')  # The league node, as in a run.
  with program.group('league'):
    program.add_node(launch.CourierNode(
        league_lib.League, str(tmp_path / 'league'),
        lambda: networks_lib.network_for(spec, config), matchmaking='pfsp',
        architecture=config_lib.architecture(config)))
  launched = launch.launch(program, launch_type='test_mt')
  steps = config_lib.unroll_steps(config, 3)
  server = reverb.Server(program_lib.make_tables(config, spec, steps + 1))
  actor = None
  try:
    league = program.groups['league'][0].create_handle().dereference()
    snapshot, _ = _lstm_network(config, seed=4)  # An opponent to meet.
    league.add_player(networks.get_variables(snapshot), 1, 1)
    client = reverb.Client(f'localhost:{server.port}')
    store = variables.VariableStore({config_lib.POLICY: weights})
    actor = acting.SelfPlayActor(config, GAME, 4, 3, 0, 11, store, league,
                                 client)
    actor.run(num_steps=120)
    actor.flush()
    size = client.server_info()[config_lib.TABLE].current_size
    items = [s.data for s in client.sample(
        config_lib.TABLE, size, emit_timesteps=False,
        unpack_as_table_signature=True)]
  finally:
    if actor is not None:
      actor.close()
    server.stop()
    launched.stop(timeout=60)
  assert len(items) >= 30
  game = pyspiel.load_game('kuhn_poker')
  states = _by_information_state(game)
  policy = lstm_policy.LSTMPolicy(config.lstm_size)
  policy.set_weights(weights)
  later = 0
  for item in items:
    observation = np.asarray(item['observation']['observation'][0])
    player = int(np.argmax(observation[:2]))  # Kuhn: the player one-hot.
    state = states[(player, tuple(observation))]
    earlier = openspiel_policy.player_observations(game, state, player)[:-1]
    expected = policy.initial_state(1)
    for seen in earlier:  # The player's earlier turns, from OpenSpiel.
      _, expected = policy.step(seen[None], np.ones((1, 2), np.float32),
                                expected)
    np.testing.assert_allclose(item['core_state']['hidden'],
                               expected.hidden[0], atol=1e-5)
    np.testing.assert_allclose(item['core_state']['cell'],
                               expected.cell[0], atol=1e-5)
    if int(item['step_type'][0]) == _MID:
      later += 1
      assert np.abs(item['core_state']['hidden']).max() > 1e-3
    else:
      assert not earlier
  assert later >= 3  # Items that start at a player's second turn.


def test_snapshot_is_rebuilt_with_the_lstm_and_plays_legal_actions(tmp_path):
  import pyspiel  # pylint: disable=g-import-not-at-top
  config = _config()
  network, spec = _lstm_network(config, seed=5)
  league = _league(str(tmp_path), config, spec)
  snapshot = league.add_player(networks.get_variables(network), 9, 9)
  # A new league on the directory (a resumed run) restores the snapshot.
  _, weights = _league(str(tmp_path), config, spec).get_weights(snapshot)
  with pytest.raises(ValueError, match='these have an LSTM core'):
    league_lib.MLPPolicy(weights)  # What repertory.play and SEED play.
  policy = lstm_policy.LSTMPolicy(config.lstm_size)
  policy.set_weights(weights)
  game = pyspiel.load_game('kuhn_poker')
  table = openspiel_policy.recurrent_tabular_policy(
      game, policy.sequence_probabilities)
  for k, state in enumerate(table.states):  # Against the eager network.
    player = state.current_player()
    seen = np.stack(openspiel_policy.player_observations(game, state, player))
    output, _ = network.unroll(seen[:, None], network.initial_state(1))
    logits = output.logits.numpy()[-1, 0]
    np.testing.assert_allclose(table.action_probability_array[k],
                               np.exp(logits) / np.exp(logits).sum(),
                               atol=1e-5)
  rng = np.random.default_rng(0)
  observations = np.stack([np.asarray(s.information_state_tensor(
      s.current_player()), np.float32) for s in table.states])
  legal = np.zeros((len(observations), 2), np.float32)
  legal[np.arange(len(legal)), rng.integers(2, size=len(legal))] = 1.0
  state = policy.initial_state(len(observations))
  for _ in range(20):
    actions, log_probs, _ = policy.act(observations, legal, state, rng,
                                       epsilon=0.3)
    assert np.all(legal[np.arange(len(actions)), actions] == 1.0)
    np.testing.assert_allclose(log_probs, 0.0, atol=1e-6)  # The only one.
  # The same directory for a network of another architecture: refused.
  mlp = _config(use_lstm=False)
  with pytest.raises(ValueError, match=r'holds snapshots of network .*'
                     r"'lstm_policy_value'.*this run builds .*'mlp_policy_q'"):
    _league(str(tmp_path), mlp, spec)


def test_a_run_on_a_league_of_another_network_is_refused(tmp_path):
  config = _config()
  network, spec = _lstm_network(config, seed=6)
  _league(str(tmp_path / 'league'), config, spec).add_player(
      networks.get_variables(network), 1, 1)
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=GAME, logdir=str(tmp_path))
  before = sorted(os.listdir(tmp_path))
  with pytest.raises(ValueError, match='lstm_size'):
    selfplay.make_program(_config(lstm_size=32), experiment)
  assert sorted(os.listdir(tmp_path)) == before  # Nothing half-written.


@pytest.mark.parametrize('overrides, match', [
    (dict(inference='server'),  # --agent=seed --selfplay: stateless server.
     r"Config.use_lstm=True applies to policy_loss='vtrace' with "
     r"inference='local' .*got policy_loss='vtrace', inference='server'"),
    (dict(policy_loss='neurd'),
     r"Config.use_lstm=True applies to .*got policy_loss='neurd'"),
    (dict(use_lstm=False, policy_loss='ppo'),
     r"Config.unroll_length=1 applies to .*got policy_loss='ppo'"),
])
def test_options_that_cannot_apply_are_refused(overrides, match, tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='selfplay', env=GAME, logdir=str(tmp_path))
  with pytest.raises(ValueError, match=match):
    selfplay.make_program(_config(**overrides), experiment)


def _reference_recurrent_vtrace(network, data, config):
  """`losses.impala_loss` on each item alone: the LSTM stepped one move at a
  time from the item's stored state, its valid moves only, bootstrapped
  from the value at its last step unless the game ended inside it; the
  mean over every valid move."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from repertory.components import losses  # pylint: disable=g-import-not-at-top
  total, steps = 0.0, 0
  for i in range(len(data['step_type'])):
    state = network.initial_state(1)
    state = type(state)(hidden=data['core_state']['hidden'][i][None],
                        cell=data['core_state']['cell'][i][None])
    logits, values = [], []
    for obs in data['observation']['observation'][i]:
      out, state = network(tf.constant(obs[None]), state)
      logits.append(out.logits[0])
      values.append(out.value[0])
    ends = np.flatnonzero(data['step_type'][i] == 2)
    n = int(ends[0]) if len(ends) else len(values) - 1  # Valid moves.
    bootstrap = 0.0 if len(ends) else values[-1]
    masked = networks_lib.masked_logits(
        tf.stack(logits[:n]),
        tf.constant(data['observation']['legal_actions'][i, :n]))
    loss = losses.impala_loss(
        masked[:, None], data['action'][i, :n, None],
        data['extras']['log_prob'][i, :n, None], tf.stack(values[:n])[:, None],
        tf.reshape(tf.cast(bootstrap, tf.float32), [1]),
        data['reward'][i, :n, None],
        config.discount * data['discount'][i, :n, None],
        baseline_cost=config.baseline_cost, entropy_cost=config.entropy_cost,
        clip_rho_threshold=config.clip_rho_threshold,
        clip_pg_rho_threshold=config.clip_rho_threshold)
    total += loss.loss * float(n)
    steps += n
  return total / steps


def test_recurrent_vtrace_matches_a_step_by_step_reference():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from repertory.agents.selfplay import updates  # pylint: disable=g-import-not-at-top
  config = _config(entropy_cost=0.03, discount=0.9, unroll_length=2)
  network, _ = _lstm_network(config, seed=7)
  rng = np.random.default_rng(0)
  b, length = 4, 3  # T = 2 moves per item.
  data = {
      'observation': {
          'observation': rng.normal(size=(b, length, 11)).astype(np.float32),
          'legal_actions': np.ones((b, length, 2), np.float32)},
      'action': rng.integers(2, size=(b, length)).astype(np.int32),
      'reward': rng.normal(size=(b, length)).astype(np.float32),
      'discount': np.ones((b, length), np.float32),
      'step_type': np.array([[1, 1, 1],    # Cut mid-game: bootstraps.
                             [0, 1, 1],    # A game's start, cut.
                             [1, 2, 2],    # One move, the end, padding.
                             [0, 1, 2]],   # Two moves, then the end.
                            np.int32),
      'extras': {'log_prob': np.log(rng.uniform(
          0.2, 0.9, size=(b, length))).astype(np.float32)},
      'core_state': {
          'hidden': rng.normal(size=(b, 16)).astype(np.float32) * 0.5,
          'cell': rng.normal(size=(b, 16)).astype(np.float32) * 0.5}}
  data['core_state']['hidden'][[1, 3]] = 0.0  # Games start at zero state.
  data['core_state']['cell'][[1, 3]] = 0.0
  for i, row in enumerate(data['step_type']):  # As the adder pads.
    end = np.flatnonzero(row == 2)
    if len(end):
      data['discount'][i, end[0] - 1:] = 0.0
      data['reward'][i, end[0]:] = 0.0
      data['action'][i, end[0]:] = 0
      data['extras']['log_prob'][i, end[0]:] = 0.0
      data['observation']['legal_actions'][i, end[0]:] = 0.0
  with tf.GradientTape(persistent=True) as tape:
    got = updates.vtrace_loss(network, data, config)['total']
    want = _reference_recurrent_vtrace(network, data, config)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  params = network.trainable_variables
  for g, w in zip(tape.gradient(got, params), tape.gradient(want, params)):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def test_repertory_play_plays_an_lstm_snapshot(tmp_path):
  import glob  # pylint: disable=g-import-not-at-top
  from repertory import environments  # pylint: disable=g-import-not-at-top
  from repertory import play  # pylint: disable=g-import-not-at-top
  config = _config()
  network, spec = _lstm_network(config, seed=8)
  snapshot = _league(str(tmp_path), config, spec).add_player(
      networks.get_variables(network), 3, 3)
  [index] = glob.glob(str(tmp_path / 'snapshots' / 'tags' / snapshot /
                          'ckpt-*.index'))
  env = environments.make(GAME, seed=0)
  player = play.make_player(f'ckpt:{index[:-len(".index")]}', env, 0, True)
  rows = play.play(env, [player, play.make_player('random', env, 1, False)],
                   50)
  assert [r['games'] for r in rows] == [50, 50]
  # Its state ran through the last game from zero, at its own turns only.
  [(seat, state)] = player._states.items()  # pylint: disable=protected-access
  assert seat == 1 and np.abs(state.hidden).max() > 0
  player.new_game()
  assert not player._states  # pylint: disable=protected-access
