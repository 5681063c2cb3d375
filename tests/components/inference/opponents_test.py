"""The inference server playing opponents (SEED-style self-play): each
environment's row is played by the policy the call names ('' the learner,
else a league snapshot whose weights the server fetches from a real League
on disk), over the real TCP channel; actions, log-probabilities and versions
are checked against the same numpy policies evaluated on their own."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import inference
from repertory.components import league as league_lib
from repertory.components import networks
from repertory.components import variables
from repertory.launch.transport import channel

N, OBS, A = 5, 4, 3
F, M = 0, 1
SEED = 11


def make_network():
  network = networks.PolicyValueNetwork(networks.MLPTorso((8,), 1),
                                        num_actions=A)
  network(tf.zeros((1, OBS)))
  return network


def weights_of(seed):
  rng = np.random.default_rng(seed)
  return {k: 3 * rng.normal(size=v.shape).astype(np.float32)
          for k, v in networks.get_variables(make_network()).items()}


@pytest.fixture(name='setup')
def fixture_setup(tmp_path):
  """(make_server(batch_timeout_ms), the learner's store, policies by
  opponent id / learner version)."""
  league = league_lib.League(str(tmp_path / 'league'), make_network,
                             snapshot_every_steps=None)
  old = league.add_player(weights_of(1), version=10, step=100)
  new = league.add_player(weights_of(2), version=20, step=200)
  store = variables.VariableStore({'policy': weights_of(3)})
  store.publish({'policy': weights_of(3)})
  servers = []

  def make_server(batch_timeout_ms=1.0):
    servers.append(inference.InferenceServer(
        lambda: league_lib.ServedPolicy(epsilon=0.25), store, None, 'unused',
        unroll_length=1, envs_per_actor=N, max_batch_size=2,
        batch_timeout_ms=batch_timeout_ms, seed=SEED, opponents=league,
        make_opponent_policy=league_lib.ServedPolicy, max_opponents=1,
        return_extras=True))
    return servers[-1]

  yield make_server, store, {store.version: (store.version, weights_of(3), 0.25),
                        old: (10, weights_of(1), 0.0),
                        new: (20, weights_of(2), 0.0)}
  for server in servers:
    server.close()


def observations(seed):
  rng = np.random.default_rng(seed)
  legal = (rng.uniform(size=(N, A)) < 0.6).astype(np.float32)
  legal[:, 0] = 1.0
  return {'observation': rng.normal(size=(N, OBS)).astype(np.float32),
          'legal_actions': legal}


def expected(policies, opponent, observation, uniform, learner_version):
  """Each row through its own policy, evaluated alone (numpy); the
  learner's rows with the weights of the version the server says it used
  (it fetches new ones without waiting)."""
  actions, log_probs, versions = [], [], []
  for row, key in enumerate(opponent):
    version, weights, epsilon = policies[key if key else learner_version]
    a, lp = league_lib.MLPPolicy(weights).act(
        observation['observation'][row:row + 1],
        observation['legal_actions'][row:row + 1], None, epsilon=epsilon,
        uniform=uniform[row:row + 1])
    actions.append(a[0])
    log_probs.append(lp[0])
    versions.append(version)
  return np.array(actions), np.array(log_probs), np.array(versions)


def play(via, actor, opponents, steps=3):
  """An actor's calls over a channel client (or straight to a server);
  returns [(observation, reply)]."""
  call = via.call if isinstance(via, channel.ChannelClient) else via.inference
  out = []
  for t in range(steps):
    observation = observations(100 * actor + t)
    reply = call(np.int64(actor), np.int64(7), np.full(N, F if t == 0
                                                              else M, np.int8),
                        np.zeros(N, np.float32), np.ones(N, np.float32),
                        observation, np.array(opponents))
    out.append((observation, reply))
  return out


def check(policies, actor, opponents, calls):
  stream = np.random.RandomState([SEED, actor])  # The server's, per actor.
  versions = set()
  for observation, (actions, extras) in calls:
    learner = [v for v, o in zip(extras['policy_version'], opponents) if not o]
    versions.update(learner)
    assert len(set(learner)) <= 1, 'one learner version per call'
    want = expected(policies, opponents, observation,
                    stream.random_sample(N), learner[0] if learner else None)
    np.testing.assert_array_equal(actions, want[0])
    np.testing.assert_allclose(extras['log_prob'], want[1], rtol=1e-5)
    np.testing.assert_array_equal(extras['policy_version'], want[2])
    legal = observation['legal_actions'][np.arange(N), actions]
    assert legal.all(), 'only legal actions'
  return versions


def test_rows_are_played_by_the_named_policies(setup):
  make_server, _, policies = setup
  server = make_server()
  old, new = sorted(k for k in policies if isinstance(k, str))  # v10, v20
  opponents = ['', old, new, old, '']
  client = channel.ChannelClient(server.channel_address())
  try:
    check(policies, 0, opponents, play(client, 0, opponents))
  finally:
    client.close()
  assert server.stats()['opponents'] == {old: 2 * 3, new: 1 * 3}


def test_two_actors_with_different_opponents_share_a_batch(setup):
  make_server, _, policies = setup
  server = make_server(batch_timeout_ms=5000.0)  # A batch waits for both.
  old, new = sorted(k for k in policies if isinstance(k, str))
  plans = {0: ['', old, old, '', new], 1: [new, new, '', old, '']}
  results = {}

  def actor(a):
    client = channel.ChannelClient(server.channel_address())
    try:
      results[a] = play(client, a, plans[a])
    finally:
      client.close()

  threads = [threading.Thread(target=actor, args=(a,)) for a in plans]
  for t in threads:
    t.start()
  for t in threads:
    t.join(60)
  assert server.stats()['num_batches'] == 3  # Each a call of both actors.
  for a, plan in plans.items():
    check(policies, a, plan, results[a])


def test_new_learner_weights_reach_the_learner_rows_only(setup):
  make_server, store, policies = setup
  server = make_server()
  old = min(k for k in policies if isinstance(k, str))
  first = store.version
  store.publish({'policy': weights_of(4)})
  policies[store.version] = (store.version, weights_of(4), 0.25)
  opponents = ['', old, '', old, '']
  versions = check(policies, 3, opponents, play(server, 3, opponents,
                                                steps=20))
  assert store.version in versions and versions <= {first, store.version}


def test_refusals(setup, tmp_path):
  make_server, store, _ = setup
  server = make_server()
  with pytest.raises(KeyError, match="No snapshot 'main@v99'"):
    play(server, 5, ['main@v99'] * N, steps=1)
  plain = inference.InferenceServer(
      league_lib.ServedPolicy, store, None, 'unused', unroll_length=1,
      envs_per_actor=N, batch_timeout_ms=1.0)
  with pytest.raises(ValueError, match='built without opponents='):
    play(plain, 0, [''] * N, steps=1)
  with pytest.raises(ValueError, match='writes no trajectories'):
    inference.InferenceServer(
        league_lib.ServedPolicy, store, object(), 'unused', unroll_length=1,
        envs_per_actor=N, opponents=league_lib.League(
            str(tmp_path / 'other'), None))
