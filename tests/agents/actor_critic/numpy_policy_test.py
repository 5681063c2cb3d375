"""NumpyPolicy against the Sonnet networks it evaluates (both kinds)."""

import collections
import gc
import sys

from dm_env import specs
import numpy as np
import pytest
import tensorflow as tf

from repertory.components import networks
from repertory.agents.actor_critic import mlp_policy
from repertory.agents.actor_critic import networks as actor_critic_nets
from repertory.agents.actor_critic import numpy_policy

FLOAT_OBS = specs.Array((4,), np.float32)
PIXELS = specs.Array((3, 3), np.uint8)
ACTIONS = specs.DiscreteArray(3)


def _network(kind, observation_spec, seed=0):
  with networks.seeded(seed):
    return mlp_policy.make_network((16, 8), observation_spec, ACTIONS, kind)


@pytest.mark.parametrize('kind', ['shared_relu', 'separate_tanh'])
@pytest.mark.parametrize('observation_spec', [FLOAT_OBS, PIXELS])
def test_logits_and_values_are_the_networks(kind, observation_spec):
  network = _network(kind, observation_spec)
  rng = np.random.default_rng(0)
  if observation_spec.dtype == np.uint8:
    observation = rng.integers(0, 256, (32, 3, 3)).astype(np.uint8)
  else:
    observation = rng.normal(size=(32, 4)).astype(np.float32)
  expected = network(tf.constant(observation))
  policy = numpy_policy.NumpyPolicy()
  policy.set_weights(networks.get_variables(network))
  logits, values = policy.outputs(observation)
  np.testing.assert_allclose(logits, expected.logits.numpy(), atol=1e-5)
  np.testing.assert_allclose(values, expected.value.numpy(), atol=1e-5)
  action, log_prob, value = policy.act(observation)
  assert action.dtype == np.int32 and log_prob.dtype == np.float32
  np.testing.assert_allclose(
      log_prob, tf.nn.log_softmax(expected.logits).numpy()[
          np.arange(32), action], atol=1e-5)
  np.testing.assert_allclose(value, expected.value.numpy(), atol=1e-5)


def _fixed_logits_policy(probabilities, greedy=False, seed=0):
  """A separate_tanh network whose logits are log(probabilities) for every
  observation (all weights 0 but the logits layer's bias)."""
  n = len(probabilities)
  with np.errstate(divide='ignore'):  # log(0) = -inf: never drawn.
    logits = np.log(probabilities).astype(np.float32)
  zeros = lambda *shape: np.zeros(shape, np.float32)  # pylint: disable=unnecessary-lambda-assignment
  weights = {'policy/layers/0/w': zeros(2, 4), 'policy/layers/0/b': zeros(4),
             'policy/layers/1/w': zeros(4, n),
             'policy/layers/1/b': logits,
             'value/layers/0/w': zeros(2, 4), 'value/layers/0/b': zeros(4),
             'value/layers/1/w': zeros(4, 1), 'value/layers/1/b': zeros(1)}
  policy = numpy_policy.NumpyPolicy(greedy=greedy, seed=seed)
  policy.set_weights(weights)
  return policy


def test_actions_follow_the_softmax_and_greedy_takes_the_most_likely():
  probabilities = np.array([0.2, 0.0, 0.5, 0.3])
  policy = _fixed_logits_policy(probabilities)
  action, log_prob, _ = policy.act(np.zeros((40000, 2), np.float32))
  frequencies = np.bincount(action, minlength=4) / len(action)
  # Three standard deviations of a frequency over 40000 draws: < 0.0075.
  np.testing.assert_allclose(frequencies, probabilities, atol=0.0075)
  np.testing.assert_allclose(log_prob, np.log(probabilities[action]),
                             atol=1e-6)
  greedy = _fixed_logits_policy(probabilities, greedy=True)
  assert set(greedy.act(np.zeros((50, 2), np.float32))[0]) == {2}


def test_the_same_seed_draws_the_same_actions():
  p = np.array([0.25, 0.25, 0.5])
  first = _fixed_logits_policy(p, seed=7)
  second = _fixed_logits_policy(p, seed=7)
  obs = np.zeros((64, 2), np.float32)
  np.testing.assert_array_equal(first.act(obs)[0], second.act(obs)[0])


def test_weights_of_another_network_are_refused_by_name():
  policy = numpy_policy.NumpyPolicy()
  with pytest.raises(RuntimeError, match='set_weights before acting'):
    policy.act(np.zeros((1, 4), np.float32))
  with pytest.raises(ValueError, match=r"neither .*'core/lstm/w'"):
    policy.set_weights({'core/lstm/w': np.zeros((2, 2))})


def test_actors_fetch_the_learners_policy_group():
  assert numpy_policy.POLICY == mlp_policy.POLICY == actor_critic_nets.POLICY


def test_evaluation_actors_take_the_networks_greedy_actions():
  # PPO's and A3C's (numpy_policy.EvalActor) and IMPALA's/SEED's
  # (acting.EvalActor with a feedforward network), from a real VariableStore.
  from repertory.components import variables  # pylint: disable=g-import-not-at-top
  from repertory.agents.actor_critic import acting  # pylint: disable=g-import-not-at-top
  from repertory.agents.actor_critic import config as config_lib  # pylint: disable=g-import-not-at-top
  spec = collections.namedtuple('Spec', 'observations actions')(
      FLOAT_OBS, ACTIONS)
  config = config_lib.ActorCriticConfig(hidden_sizes=(16, 8))
  observations = np.random.default_rng(1).normal(size=(20, 4)).astype(
      np.float32)
  for network, actor in [
      (_network('separate_tanh', FLOAT_OBS), numpy_policy.EvalActor),
      (actor_critic_nets.make_network(config, FLOAT_OBS, ACTIONS),
       lambda source: acting.make_eval_actor(config, spec, source))]:
    store = variables.VariableStore(
        {numpy_policy.POLICY: networks.get_variables(network)}, version=3)
    evaluator = actor(store)
    evaluator.update(wait=True)
    greedy = network(tf.constant(observations)).logits.numpy().argmax(-1)
    assert [int(evaluator.select_action(o)) for o in observations] == list(
        greedy)


def test_lstm_steps_are_the_networks_with_resets_where_episodes_start():
  from repertory.agents.actor_critic import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.ActorCriticConfig(hidden_sizes=(16,), use_lstm=True,
                                        lstm_size=8)
  network = actor_critic_nets.make_network(config, FLOAT_OBS, ACTIONS)
  policy = numpy_policy.LogitsPolicy(lstm_size=8)
  policy.set_weights(networks.get_variables(network))
  rng = np.random.default_rng(2)
  state, tf_state = policy.initial_state(5), network.initial_state(5)
  for t in range(6):
    observation = rng.normal(size=(5, 4)).astype(np.float32)
    first = (rng.random(5) < 0.3) | (t == 0)
    _, extras, state = policy.step(observation, state, first)
    keep = tf.constant(~first[:, None], tf.float32)  # Reset, as the actor.
    tf_state = type(tf_state)(tf_state.hidden * keep, tf_state.cell * keep)
    expected, tf_state = network(tf.constant(observation), tf_state)
    np.testing.assert_allclose(extras['logits'], expected.logits.numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(state.hidden, tf_state.hidden.numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(state.cell, tf_state.cell.numpy(), atol=1e-5)


def test_acting_leaves_no_python_objects_behind():
  policy = _fixed_logits_policy(np.array([0.5, 0.5]))
  observation = np.zeros((8, 2), np.float32)
  for _ in range(200):
    policy.step(observation, (), None)
  gc.collect()
  before = sys.getallocatedblocks()
  for _ in range(20_000):
    policy.step(observation, (), None)
  gc.collect()
  # A long-running actor. One block per call would leave 20,000; other
  # threads of a test worker move the count by a few hundred.
  assert sys.getallocatedblocks() - before < 2_000
