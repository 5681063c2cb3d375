"""The league node's snapshots (real variable store, the kit's feed-forward
actor as the agent's evaluation actor), its consistency with a learner that
resumed from an older checkpoint, and the one-line refusals of a league
directory a run cannot go on from."""

import functools
import json
import os

from absl import logging
import numpy as np
import pytest
import tree

from repertory.components import actors
from repertory.components import league
from repertory.components import networks
from repertory.components.variables import store as store_lib


def _network():
  from repertory import experiment as experiment_lib  # pylint: disable=g-import-not-at-top
  spec = experiment_lib.environment_spec(
      functools.partial(league.against_random_seat, 'openspiel:kuhn_poker'))
  return functools.partial(networks.mlp_policy_value_network, spec, (8,))


def _learner(make_network, version):
  store = store_lib.VariableStore(
      {'policy': networks.get_variables(make_network())})
  for _ in range(version):
    store.publish({'policy': networks.get_variables(make_network())})
  return store


def test_snapshots_by_version_and_dropped_after_an_older_resume(tmp_path):
  make_network = _network()
  make_eval_actor = functools.partial(actors.FeedForwardActor, make_network)
  directory = str(tmp_path / 'league')
  learner = _learner(make_network, 5)
  node = league.LeagueNode(directory, learner, make_eval_actor,
                           snapshot_every_versions=2, poll_seconds=0.01)
  assert node.snapshot() is None  # The first, main@v5, at the start.
  assert [p['id'] for p in node.players()] == ['main@v5']
  learner.publish({'policy': networks.get_variables(make_network())})
  assert node.snapshot() is None  # Only one version past it.
  learner.publish({'policy': networks.get_variables(make_network())})
  assert node.snapshot() == 'main@v7'
  version, variables = node.get_snapshot('main@v7')
  assert version == 7
  served = learner.get_variables(['policy']).variables[0]
  for got, want in zip(tree.flatten(variables['policy']), tree.flatten(served)):
    np.testing.assert_array_equal(got, want)
  assert sorted(os.listdir(os.path.join(directory, 'weights'))) == [
      'main_at_v5.npz', 'main_at_v7.npz']
  # The learner crashed and resumed from its checkpoint at version 6.
  resumed = _learner(make_network, 6)
  with pytest.MonkeyPatch.context() as patch:
    lines = []
    patch.setattr(logging, 'warning', lambda msg, *a: lines.append(msg % a))
    again = league.LeagueNode(directory, resumed, make_eval_actor,
                              snapshot_every_versions=2, poll_seconds=0.01)
    again.snapshot()
  assert [p['id'] for p in again.players()] == ['main@v5']
  assert os.listdir(os.path.join(directory, 'weights')) == ['main_at_v5.npz']
  assert len(lines) == 1 and 'main@v7' in lines[0] and '\n' not in lines[0]
  with open(os.path.join(directory, 'league.json')) as f:
    assert [p['id'] for p in json.load(f)['players']] == ['main@v5']


def test_reports_move_the_payoffs_and_ratings(tmp_path):
  make_network = _network()
  node = league.LeagueNode(
      str(tmp_path), _learner(make_network, 0),
      functools.partial(actors.FeedForwardActor, make_network))
  node.snapshot()
  node.report([('main', 'main@v0', 0.75)] * 20)
  summary = node.summary()
  assert summary['league/games'] == 20
  assert summary['league/main/elo'] > 1000


@pytest.mark.parametrize('content, match', [
    ('[]', 'is not a league \\(a JSON list, not an object\\)'),
    ('{"players": [', 'is not readable JSON'),
    ('{"players": []}', 'is not a league \\(no last_snapshot'),
])
def test_a_damaged_league_json_is_refused_in_one_line(tmp_path, content,
                                                      match):
  (tmp_path / 'league.json').write_text(content)
  with pytest.raises(ValueError, match=match) as error:
    league.check_directory(str(tmp_path), resumed=True)
  assert '\n' not in str(error.value)


def test_a_missing_league_json_is_refused_when_the_run_resumes(tmp_path):
  league.check_directory(str(tmp_path / 'new'), resumed=False)  # Fresh: fine.
  league.check_directory(str(tmp_path / 'new'), resumed=True)   # None before.
  (tmp_path / 'weights').mkdir()
  (tmp_path / 'weights' / 'main_at_v0.npz').write_bytes(b'')
  with pytest.raises(ValueError, match='league.json is missing') as error:
    league.check_directory(str(tmp_path), resumed=False)
  assert '\n' not in str(error.value)
