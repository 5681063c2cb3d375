"""`acting.SearchSelfPlayActor` writes every position of its games to a real
Reverb table: the mover's view, its legal moves, the search's visit
distribution and the mover's final return."""

import os
import subprocess
import sys

import numpy as np
import pyspiel
import pytest
import reverb
import tensorflow as tf

from repertory import environments
from repertory import testing
from repertory.components import adders
from repertory.components import networks
from repertory.agents.alphazero import acting
from repertory.components import variables

GAME = 'openspiel:tic_tac_toe'


def _example(env):
  a = env.num_actions
  return {'observation': np.zeros(env.player_observation_shape(), np.float32),
          'legal_actions': np.zeros(a, np.float32),
          'search_policy': np.zeros(a, np.float32),
          'outcome': np.float32(0.0)}


def _child(state, action):
  child = state.clone()
  child.apply_action(action)
  return child


def _network():
  network = networks.PolicyValueNetwork(networks.MLPTorso((16,), 3),
                                        num_actions=9)
  network(tf.zeros((1, 3, 3, 3)))
  return network


def _server(env):
  return reverb.Server([reverb.Table.queue(
      'positions', 1000, signature=adders.position_signature(_example(env)))])


def test_writes_each_position_with_its_search_policy_and_outcome():
  env = environments.make(GAME)
  source = variables.VariableStore(
      {'policy': networks.get_variables(_network())}, version=3)
  server = _server(env)
  try:
    client = reverb.Client(f'localhost:{server.port}')
    actor = acting.SearchSelfPlayActor(
        GAME, source, client, 'positions', simulations=16,
        temperature_moves=2, actor_id=5, seed=1)
    counts = [actor.play_game() for _ in range(3)]
    actor.close()
    items = testing.read_queue(client, 'positions')
  finally:
    server.stop()
  assert len(items) == sum(counts) and all(5 <= n <= 9 for n in counts)
  game = pyspiel.load_game('tic_tac_toe')
  start = 0
  for n in counts:  # Replay each game from its written positions.
    state = game.new_initial_state()
    for k, item in enumerate(items[start:start + n]):
      player = state.current_player()
      np.testing.assert_array_equal(item['observation'],
                                    env.observe(state, player))
      legal = np.zeros(9)
      legal[state.legal_actions()] = 1
      np.testing.assert_array_equal(item['legal_actions'], legal)
      policy = item['search_policy']
      np.testing.assert_allclose(policy.sum(), 1.0, rtol=1e-6)
      assert np.all(policy[legal == 0] == 0)
      assert item['policy_version'] == 3 and item['actor_id'] == 5
      # The move played: the one that leads to the next position.
      if k + 1 < n:
        following = items[start + k + 1]['observation']
        played = [a for a in state.legal_actions() if np.array_equal(
            env.observe(_child(state, a), 1 - player), following)]
      else:
        played = [a for a in state.legal_actions()
                  if _child(state, a).is_terminal()]
      assert played, f'no move leads from position {k} to the next'
      state.apply_action(played[0])
    returns = state.returns()
    assert state.is_terminal()
    for k, item in enumerate(items[start:start + n]):
      assert item['outcome'] == returns[k % 2]  # Movers alternate X, O.
    start += n


@pytest.mark.parametrize('game, match', [
    ('openspiel:kuhn_poker', 'perfect information and no chance'),
    ('catch', "plays OpenSpiel games; 'catch' is not one"),
])
def test_refuses_games_it_cannot_search(game, match):
  with pytest.raises(ValueError, match=match):
    acting.SearchSelfPlayActor(game, variables.VariableStore({'policy': {}}),
                               None, 'positions')


_NO_TENSORFLOW = """
import sys
sys.modules['tensorflow'] = None  # Any import of it fails loudly.
import numpy as np
from repertory.agents.alphazero import acting
from repertory.components import variables
from repertory.launch.process import reverb_lite
source = variables.VariableStore({'policy': dict(np.load(%r))})
actor = acting.SearchSelfPlayActor(%r, source, reverb_lite.connect(%r),
                                   'positions', simulations=8)
print('POSITIONS', actor.play_game())
actor.close()
print('HEAVY', [m for m in ('tensorflow', 'sonnet')
                if sys.modules.get(m) is not None])
"""


def test_plays_and_writes_without_tensorflow(tmp_path):
  weights = os.path.join(tmp_path, 'weights.npz')
  np.savez(weights, **networks.get_variables(_network()))
  env = environments.make(GAME)
  server = _server(env)
  try:
    result = subprocess.run(
        [sys.executable, '-c', _NO_TENSORFLOW % (
            weights, GAME, f'localhost:{server.port}')],
        capture_output=True, text=True, timeout=120, check=False)
    client = reverb.Client(f'localhost:{server.port}')
    items = testing.read_queue(client, 'positions')
  finally:
    server.stop()
  output = result.stdout + result.stderr
  assert result.returncode == 0, output
  assert 'HEAVY []' in result.stdout, output
  assert f'POSITIONS {len(items)}' in result.stdout and items, output
