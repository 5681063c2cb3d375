"""The N-player adapters: OpenSpiel and PettingZoo games step with legal
actions only, report per-player views, and refuse bad specs in one line."""

import dm_env
import numpy as np
import pytest

from repertory import environments
from repertory.environments import multiagent

SPECS = [
    'openspiel:kuhn_poker',
    'openspiel:leduc_poker',
    'openspiel:connect_four',
    'openspiel:matrix_rps',            # simultaneous
    'openspiel:goofspiel(num_cards=4)',  # simultaneous with chance
    'pettingzoo:classic.tictactoe_v3',  # AEC
    'pettingzoo:classic.rps_v2/parallel',  # parallel
]


def _play(env, rng, episodes):
  """Plays random legal actions; checks every timestep against the specs."""
  spec = env.observation_spec()
  lengths = []
  for _ in range(episodes):
    timestep = env.reset()
    assert timestep.first()
    steps = 0
    while not timestep.last():
      obs = timestep.observation
      for key in spec:
        spec[key].validate(obs[key])
      player = int(obs['current_player'])
      legal = obs['legal_actions']
      if env.simultaneous:
        assert player == multiagent.SIMULTANEOUS
        actors = range(env.num_players)
      else:
        assert 0 <= player < env.num_players
        others = np.delete(legal, player, axis=0)
        assert not others.any(), 'only the current player has legal actions'
        actors = [player]
      actions = np.zeros(env.num_players, np.int64)
      for p in actors:
        assert legal[p].any()
        actions[p] = rng.choice(np.flatnonzero(legal[p]))
      timestep = env.step(actions)
      env.reward_spec().validate(timestep.reward)
      steps += 1
    assert np.all(timestep.discount == 0.0)
    assert int(timestep.observation['current_player']) == multiagent.TERMINAL
    assert not timestep.observation['legal_actions'].any()
    lengths.append(steps)
  return lengths


@pytest.mark.parametrize('spec', SPECS)
def test_games_step_with_legal_actions(spec):
  env = environments.make(spec, seed=1)
  assert isinstance(env, multiagent.MultiAgentEnvironment)
  assert isinstance(env, dm_env.Environment)
  lengths = _play(env, np.random.default_rng(0), episodes=20)
  assert min(lengths) >= 1


def test_kuhn_poker_is_zero_sum_and_seeded():
  def returns(seed):
    env = environments.make('openspiel:kuhn_poker', seed=seed)
    rng = np.random.default_rng(5)
    totals = []
    for _ in range(50):
      timestep, total = env.reset(), np.zeros(2)
      while not timestep.last():
        p = int(timestep.observation['current_player'])
        timestep = env.step(int(rng.choice(np.flatnonzero(
            timestep.observation['legal_actions'][p]))))
        total += timestep.reward
      totals.append(total)
    return np.array(totals)
  a, b = returns(3), returns(3)
  np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(a.sum(axis=1), 0.0)
  assert set(np.abs(a[:, 0])) <= {1.0, 2.0}


def test_player_views_differ_in_imperfect_information():
  env = environments.make('openspiel:kuhn_poker', seed=0)
  timestep = env.reset()
  views = [multiagent.player_view(timestep, p) for p in range(2)]
  # Each player sees its own card only: the two information states differ.
  assert not np.array_equal(views[0]['observation'], views[1]['observation'])
  spec = multiagent.player_spec(env)
  spec.observations['observation'].validate(views[0]['observation'])
  spec.observations['legal_actions'].validate(views[0]['legal_actions'])
  assert spec.rewards.shape == ()


def test_illegal_action_is_refused():
  env = environments.make('openspiel:connect_four', seed=0)
  timestep = env.reset()
  for _ in range(6):  # Fill column 0.
    timestep = env.step(0)
  assert timestep.observation['legal_actions'][0, 0] == 0.0
  with pytest.raises(ValueError, match=r'action 0 of player 0 is illegal'):
    env.step(0)
  env = environments.make('pettingzoo:classic.tictactoe_v3', seed=0)
  env.reset()
  env.step(4)
  with pytest.raises(ValueError, match='illegal'):
    env.step(4)


def _cells(plane):
  return {tuple(int(i) for i in cell) for cell in np.argwhere(plane > 0)}


def test_relative_view_shows_the_board_from_each_side():
  # Connect Four, columns 3, 3, 2: player 0 holds (row 0, col 2) and
  # (0, 3), player 1 holds (1, 3); 'relative' puts the observer's own
  # pieces in plane 0 and its opponent's in plane 1.
  absolute = environments.make('openspiel:connect_four', seed=0)
  relative = environments.make('openspiel:connect_four/relative', seed=0)
  for env in (absolute, relative):
    env.reset()
    for column in (3, 3, 2):
      timestep = env.step(column)
    if env is absolute:
      boards = timestep.observation['observation']
  views = timestep.observation['observation']
  mine, theirs = {(0, 2), (0, 3)}, {(1, 3)}
  assert (_cells(views[0][0]), _cells(views[0][1])) == (mine, theirs)
  assert (_cells(views[1][0]), _cells(views[1][1])) == (theirs, mine)
  np.testing.assert_array_equal(views[0], boards[0])
  np.testing.assert_array_equal(views[1][2], boards[1][2])  # Empty cells.
  # Tic-tac-toe keeps player 0's (x) pieces in plane 2, player 1's in 1.
  env = environments.make('openspiel:tic_tac_toe/relative', seed=0)
  env.reset()
  env.step(0)
  views = env.step(4).observation['observation']
  assert (_cells(views[0][2]), _cells(views[0][1])) == ({(0, 0)}, {(1, 1)})
  assert (_cells(views[1][2]), _cells(views[1][1])) == ({(1, 1)}, {(0, 0)})


def test_simultaneous_step_needs_every_action():
  env = environments.make('openspiel:matrix_rps', seed=0)
  env.reset()
  with pytest.raises(ValueError, match='needs 2 actions'):
    env.step(1)


@pytest.mark.parametrize('spec, match', [
    ('openspiel:kuhn_pokr', r"no game 'kuhn_pokr': did you mean kuhn_poker"),
    ('openspiel:kuhn_poker(foo=1)', r"Unknown parameter 'foo'"),
    ('openspiel:mfg_crowd_modelling', r'MEAN_FIELD dynamics; supported'),
    ('openspiel:kuhn_poker/relative',
     r"'kuhn_poker' has no relative view; games with one: connect_four"),
    ('openspiel:connect_four/mine', r"only suffix is '/relative'"),
    ('pettingzoo:classic.nope_v1', r"PettingZoo has no module"),
    ('pettingzoo:classic.rps_v2/foo', r"only suffix is '/parallel'"),
    ('pettingzoo:classic..x', r"expected '<family>.<game>'"),
])
def test_bad_specs_get_one_line(spec, match):
  with pytest.raises(environments.UnknownEnvironmentError, match=match) as e:
    environments.make(spec)
  assert '\n' not in str(e.value)
  assert spec in str(e.value)
