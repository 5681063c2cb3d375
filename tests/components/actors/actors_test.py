"""FeedForwardActor, BatchedActor and GreedyActor on catch, a real Reverb queue and a
VariableStore serving versioned weights."""

import numpy as np
import portpicker
import pytest
import reverb
import sonnet as snt
import tensorflow as tf

from repertory import environments
from repertory.components import actors
from repertory.components import adders
from repertory.components import networks
from repertory.components import variables
from repertory.components.actors import epsilon_greedy

N, T = 3, 4
SPEC = adders.make_environment_spec(environments.make('catch', seed=0))


def make_network(seed=0):
  tf.random.set_seed(seed)
  network = networks.PolicyValueNetwork(networks.MLPTorso((8,), obs_rank=2),
                                        num_actions=3)
  network(tf.zeros((1, 10, 5)))
  return network


@pytest.fixture
def replay():
  """A client of a fresh Reverb server holding one unroll queue."""
  port = portpicker.pick_unused_port()
  signature = adders.unroll_signature(
      SPEC, T, extras_spec={'logits': np.zeros(3, np.float32)})
  server = reverb.Server(
      [reverb.Table.queue('queue', 100, signature=signature)], port=port)
  yield reverb.Client(f'localhost:{port}')
  server.stop()


def read_all(client):
  size = client.server_info()['queue'].current_size
  return [s.data for s in client.sample(
      'queue', size, emit_timesteps=False, unpack_as_table_signature=True)]


class LogitsActor(actors.FeedForwardActor):
  """Also returns the behaviour logits, as IMPALA's actors record them."""

  def act(self, observations):
    actions = super().act(observations)
    return actions, {'logits': self.network(observations).logits.numpy()}


def test_feed_forward_actor_acts_with_the_served_weights():
  store = variables.VariableStore(
      {'policy': networks.get_variables(make_network(seed=1))})
  actor = actors.FeedForwardActor(make_network(seed=2), store, 'policy')
  observations = np.random.RandomState(0).rand(5, 10, 5).astype(np.float32)
  assert actor.version == -1
  actor.update(wait=True)
  assert actor.version == 0
  expected = make_network(seed=1)(observations).logits.numpy().argmax(-1)
  np.testing.assert_array_equal(actor.act(observations), expected)
  assert actor.select_action(observations[0]) == expected[0]
  new = make_network(seed=3)
  store.publish({'policy': networks.get_variables(new)})
  actor.update(wait=True)
  assert actor.version == 1
  np.testing.assert_array_equal(actor.act(observations),
                                new(observations).logits.numpy().argmax(-1))
  actor.close()


def test_feed_forward_actor_samples_and_needs_built_variables():
  network = make_network()
  sampler = actors.FeedForwardActor(network, greedy=False, seed=0)
  assert sampler.version == 0  # No variable source: its own weights.
  actions = sampler.act(np.zeros((400, 10, 5), np.float32))
  assert actions.dtype == np.int32 and set(actions.tolist()) == {0, 1, 2}
  from_factory = actors.FeedForwardActor(lambda: network)
  assert from_factory.network is network
  unbuilt = networks.PolicyValueNetwork(networks.MLPTorso((8,), obs_rank=2),
                                        num_actions=3)
  with pytest.raises(ValueError, match='no variables yet'):
    actors.FeedForwardActor(unbuilt)


def test_batched_actor_writes_unrolls_tagged_with_the_acting_version(replay):
  store = variables.VariableStore(
      {'policy': networks.get_variables(make_network())})
  policy = LogitsActor(make_network(), store, 'policy', greedy=False)
  adder = adders.UnrollAdder(replay, 'queue', T, N, environment_spec=SPEC)
  actor = actors.BatchedActor(environments.make_batched('catch', N, seed=0),
                              policy, adder, report_every=T)
  actor.run(num_steps=2 * T)
  adder.flush()
  store.publish({'policy': networks.get_variables(make_network(seed=5))})
  policy.update(wait=True)
  actor.run(num_steps=2 * T)  # Continues where it stopped, with version 1.
  adder.flush()
  actor.close()
  assert actor.steps == 4 * T
  items = read_all(replay)
  assert len(items) == 4 * N  # One [T + 1] unroll per env per T steps.
  versions = [int(item['policy_version']) for item in items]
  assert versions == [0] * (2 * N) + [1] * (2 * N)
  first = items[0]
  assert first['observation'].shape == (T + 1, 10, 5)
  assert first['step_type'][0] == 0  # The reset.
  # The recorded logits are the network's on the recorded observations.
  logits = make_network()(first['observation'][:T]).logits.numpy()
  np.testing.assert_allclose(first['extras']['logits'][:T], logits,
                             rtol=1e-5, atol=1e-5)


def test_batched_actor_without_an_adder_writes_nothing(replay):
  policy = actors.FeedForwardActor(make_network())
  actor = actors.BatchedActor(environments.make_batched('catch', 2, seed=0),
                              policy, report_every=5)
  actor.run(num_steps=20)
  assert actor.steps == 20
  assert replay.server_info()['queue'].current_size == 0
  actor.close()
  with pytest.raises(ValueError, match='report_every must be >= 1'):
    actors.BatchedActor(environments.make_batched('catch', 1), policy,
                        report_every=0)


class QNetwork(networks.MLPTorso):
  """[B, 10, 5] boards -> Q-values of 3 actions (an MLP torso, then linear)."""

  def __init__(self):
    super().__init__((8,), obs_rank=2)
    self._head = snt.Linear(3, name='q')

  def __call__(self, observations):
    return self._head(super().__call__(observations))


def make_q_network(seed=0, build=True):
  tf.random.set_seed(seed)
  network = QNetwork()
  if build:
    network(tf.zeros((1, 10, 5)))
  return network


def test_greedy_actor_acts_on_the_served_weights_in_a_graph_of_its_own():
  store = variables.VariableStore(
      {'policy': networks.get_variables(make_q_network(seed=1))})
  actor = epsilon_greedy.GreedyActor(lambda: make_q_network(build=False),
                             SPEC.observations, store, epsilon=0.0)
  observations = np.random.RandomState(0).rand(20, 10, 5).astype(np.float32)
  actor.update(wait=True)
  expected = make_q_network(seed=1)(observations).numpy().argmax(-1)
  assert len(set(expected)) > 1  # The check below can tell actions apart.
  assert [actor.select_action(o) for o in observations] == list(expected)
  new = make_q_network(seed=3)
  store.publish({'policy': networks.get_variables(new)})
  actor.update(wait=True)
  assert ([actor.select_action(o) for o in observations] ==
          list(new(observations).numpy().argmax(-1)))
  explorer = epsilon_greedy.GreedyActor(lambda: make_q_network(build=False),
                                SPEC.observations, store, epsilon=1.0)
  explorer.update(wait=True)
  taken = [explorer.select_action(observations[0]) for _ in range(300)]
  assert set(taken) == {0, 1, 2}
