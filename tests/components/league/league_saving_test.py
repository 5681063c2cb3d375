"""league.json: written when the program stops (every report in it, however
long `save_every_seconds`), atomically, continued by a new League on the
same directory (pool, payoffs, Elo, exploiter generations), and never
replaced by a league of another run."""

import json
import os

import pytest

from repertory import launch
from repertory.components import league as league_lib


def _read(directory):
  with open(os.path.join(directory, 'league.json')) as f:
    return json.load(f)


def _play(league, games):
  """A game reporter: `games` results of main against its snapshot, then
  the program's stop."""
  league.report([('main', 'main@v1', 1.0)] * games)
  launch.stop()


def test_the_league_is_saved_when_the_program_stops(tmp_path):
  directory = str(tmp_path / 'league')
  program = launch.Program('league_at_stop')
  with program.group('league'):
    league = program.add_node(launch.CourierNode(
        league_lib.League, directory, matchmaking='pfsp',
        save_every_seconds=1e9))  # Never by schedule: only at stop.
  with program.group('player'):
    program.add_node(launch.PyNode(_play, league, 37))
  seeded = league_lib.League(directory, matchmaking='pfsp')
  seeded.add_player(None, version=1, step=10)  # main@v1, saved.
  assert _read(directory)['games'] == 0
  seeded_id = _read(directory)['league_id']
  launch.launch(program, launch_type='test_mt').wait(timeout=60)
  state = _read(directory)
  assert state['games'] == 37  # Reported after the last scheduled save.
  assert state['payoff']  # The games' payoffs...
  assert state['elo']['main'] > 1000.0  # ...and ratings are in it.
  assert state['league_id'] == seeded_id  # The same league, continued.
  assert sorted(os.listdir(directory)) == ['league.json']  # No temp file.


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path,
                                                             monkeypatch):
  league = league_lib.League(str(tmp_path), matchmaking='pfsp')
  league.add_player(None, version=1, step=10)
  before = (tmp_path / 'league.json').read_text()

  def dump_half_then_fail(state, f):
    f.write(json.dumps(state)[:20])
    raise OSError('disk full')

  monkeypatch.setattr(json, 'dump', dump_half_then_fail)
  with pytest.raises(OSError, match='disk full'):
    league.add_player(None, version=2, step=20)
  monkeypatch.undo()
  assert (tmp_path / 'league.json').read_text() == before
  assert sorted(os.listdir(tmp_path)) == ['league.json']


def test_a_resumed_league_continues_pool_and_exploiter_generations(tmp_path):
  identity = {'env': 'openspiel:kuhn_poker', 'hidden_sizes': (16,)}
  league = league_lib.League(str(tmp_path), matchmaking='pfsp',
                             exploiter_reset_steps=20, identity=identity)
  league.add_player(None, version=3, step=20)  # main@v3
  assert league.maybe_add(None, 0, 0, 'exploiter0') is None  # Generation 1.
  league.report([('exploiter0', 'main@v3', 1.0)] * 4 +
                [('main', 'main@v3', 0.5)] * 2)
  assert league.maybe_add(None, 21, 20, 'exploiter0') == 'exploiter0@v21'
  league.reset_learner('exploiter0', 20)
  league.report([('exploiter0', 'main@v3', 0.0)] * 3)
  league.save()
  before = (league.players(), league.elo(), league.summary(), league.table())

  again = league_lib.League(str(tmp_path), matchmaking='pfsp',
                            exploiter_reset_steps=20,
                            identity=dict(identity, hidden_sizes=[16]))
  assert (again.players(), again.elo(), again.summary(),
          again.table()) == before
  assert again.summary()['league/exploiter0/resets'] == 1
  assert again.summary()['league/exploiter0/win_rate_vs_main'] == 0.0
  # The next generation ends 20 steps after the reset, not after 0...
  assert again.maybe_add(None, 35, 39, 'exploiter0') is None
  assert again.maybe_add(None, 41, 40, 'exploiter0') == 'exploiter0@v41'
  again.reset_learner('exploiter0', 40)
  assert again.summary()['league/exploiter0/resets'] == 2
  assert [p['id'] for p in again.players()] == [
      'main@v3', 'exploiter0@v21', 'exploiter0@v41']


def test_an_exploiter_resumed_from_an_older_step_restarts_its_count(tmp_path):
  league = league_lib.League(str(tmp_path), matchmaking='pfsp',
                             exploiter_reset_steps=20)
  league.maybe_add(None, 0, 0, 'exploiter0')
  league.reset_learner('exploiter0', 100)
  # Its learner came back from a checkpoint of step 90.
  assert league.maybe_add(None, 1, 90, 'exploiter0') is None
  assert league.maybe_add(None, 2, 109, 'exploiter0') is None
  assert league.maybe_add(None, 3, 110, 'exploiter0') == 'exploiter0@v3'


def test_a_league_of_another_run_is_refused_not_replaced(tmp_path):
  league_lib.League(str(tmp_path), identity={'env': 'openspiel:kuhn_poker',
                                             'hidden_sizes': [64, 64]}
                    ).add_player(None, version=1, step=10)
  before = (tmp_path / 'league.json').read_text()
  with pytest.raises(ValueError, match=r"holds the league of another run "
                     r"\(env: 'openspiel:kuhn_poker' -> "
                     r"'openspiel:leduc_poker'\); a new league will not "
                     r'replace it'):
    league_lib.League(str(tmp_path), identity={
        'env': 'openspiel:leduc_poker', 'hidden_sizes': [64, 64]})
  assert (tmp_path / 'league.json').read_text() == before


def test_an_unreadable_league_json_is_refused_not_replaced(tmp_path):
  (tmp_path / 'league.json').write_text('{"players": [')
  with pytest.raises(ValueError, match='is not a league this code can read '
                     r'\(JSONDecodeError'):
    league_lib.League(str(tmp_path))
  assert (tmp_path / 'league.json').read_text() == '{"players": ['


def test_a_league_never_overwrites_one_another_league_wrote(tmp_path):
  ours = league_lib.League(str(tmp_path / 'a'))
  ours.add_player(None, version=1, step=10)
  theirs = league_lib.League(str(tmp_path / 'b'))
  theirs.add_player(None, version=7, step=70)
  os.replace(tmp_path / 'b' / 'league.json', tmp_path / 'a' / 'league.json')
  replaced = (tmp_path / 'a' / 'league.json').read_text()
  with pytest.raises(RuntimeError, match='now holds another league'):
    ours.save()
  assert (tmp_path / 'a' / 'league.json').read_text() == replaced
  ours2 = league_lib.League(str(tmp_path / 'a'))  # Whoever loads it owns it.
  ours2.save()
  assert [p['id'] for p in ours2.players()] == ['main@v7']


def test_an_exploiters_first_generation_lasts_its_step_budget(tmp_path):
  """Also when its first offer comes before any of its games was reported
  (its actors played only themselves until main's first snapshot)."""
  league = league_lib.League(str(tmp_path), matchmaking='pfsp',
                             exploiter_reset_steps=50)
  assert league.maybe_add(None, 49, 49, 'exploiter0') is None
  assert league.maybe_add(None, 50, 50, 'exploiter0') == 'exploiter0@v50'
  fresh = league_lib.League(str(tmp_path / 'b'), matchmaking='pfsp',
                            exploiter_reset_steps=50)
  assert fresh.maybe_add(None, 50, 50, 'exploiter1') == 'exploiter1@v50'
