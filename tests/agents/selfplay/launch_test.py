"""Self-play launched like every other agent: `python -m repertory.run
--agent=ppo|seed|impala --selfplay=<rule>` under local_mp (a local Ray
instance, one process per node) and on a loopback Ray cluster with token
authentication (`--lp_launch_type=ray`); each run fills the league and logs
every game's opponent and version."""

import csv
import json
import os
import subprocess
import sys

import pytest

from repertory import testing

GAME = 'openspiel:kuhn_poker'


@pytest.fixture(name='cluster')
def fixture_cluster():
  with testing.loopback_ray_cluster(num_cpus=8) as cluster:
    yield cluster


def _run(logdir, agent, rule, launch_type, *extra):
  result = subprocess.run(
      [sys.executable, '-m', 'repertory.run', f'--agent={agent}',
       f'--selfplay={rule}', f'--env={GAME}', f'--lp_launch_type={launch_type}',
       '--num_actors=2', '--envs_per_actor=8', '--max_actor_steps=6000',
       '--eval_episodes=20', '--config.snapshot_every_steps=20',
       '--config.batch_size=16', f'--logdir={logdir}', *extra],
      capture_output=True, text=True, timeout=540, check=False,
      env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  with open(os.path.join(logdir, 'league', 'league.json')) as f:
    league = json.load(f)
  games = []
  for i in range(2):
    with open(os.path.join(logdir, 'games', f'actor_{i}.csv')) as f:
      games += list(csv.DictReader(f))
  return results, league, games


def _check(results, league, games, policy_loss, inference, launch_type):
  assert results['agent'] == 'selfplay'
  assert results['launch_type'] == launch_type
  assert (results['policy_loss'], results['inference']) == (policy_loss,
                                                            inference)
  assert results['actor_steps'] >= 6000 and results['learner_steps'] > 0
  snapshots = {p['id'] for p in league['players']}
  assert len(snapshots) >= 2
  met = {(g['opponent'], int(g['opponent_version'])) for g in games}
  assert any(o in snapshots for o, _ in met)  # PFSP met the pool...
  for opponent, version in met:  # ...logged with each snapshot's version.
    assert opponent == 'main' or opponent == f'main@v{version}'


@pytest.mark.slow  # Seven processes that each import TensorFlow.
@pytest.mark.timeout(600)
def test_ppo_selfplay_under_local_mp(tmp_path):
  out = _run(str(tmp_path / 'run'), 'ppo', 'pfsp', 'local_mp')
  _check(*out, 'ppo', 'local', 'local_mp')


@pytest.mark.slow  # A Ray cluster and eight processes.
@pytest.mark.timeout(600)
def test_seed_selfplay_on_a_ray_cluster(cluster, tmp_path):
  out = _run(str(tmp_path / 'run'), 'seed', 'pfsp', 'ray',
             f'--ray_address={cluster.address}')
  _check(*out, 'vtrace', 'server', 'ray')
