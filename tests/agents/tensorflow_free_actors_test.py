"""PPO's and IMPALA's actors act and write to their queue in a process
without TensorFlow (numpy policies, Reverb's C++ writer), with the
behaviour the learner's network gives their actions."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tree

from repertory import experiment as experiment_lib
from repertory import testing
from repertory.agents import impala
from repertory.agents import ppo
from repertory.agents import seed as seed_agent
from repertory.agents.ppo import program as ppo_program
from repertory.components import networks
from repertory.agents.actor_critic import mlp_policy
from repertory.agents.actor_critic import networks as actor_critic_nets
from repertory.agents.actor_critic import tables as actor_critic_tables

CATCH = experiment_lib.environment_spec('catch')
PPO = dict(unroll_length=5, hidden_sizes=(16,), network='separate_tanh',
           round_timeout_s=60.0)
IMPALA = dict(unroll_length=5, hidden_sizes=(16,), shared_torso=False,
              activation='tanh', variable_update_period=1)

# Run in a fresh interpreter; `{build_actor}` builds `actor` from `config`,
# `learner` (a real VariableStore serving the weights) and `replay`.
_ACTOR_PROCESS = '''
import sys
sys.modules['tensorflow'] = None  # Any import of it fails loudly.
import numpy as np
from repertory.agents import {agent}
from repertory.components import variables
from repertory.launch.process import reverb_lite

config = {agent}.Config(**{config!r})
learner = variables.VariableStore(
    {{'policy': dict(np.load({weights_file!r}))}})
replay = reverb_lite.connect({address!r})
{build_actor}
print('HEAVY', [m for m in ('tensorflow', 'sonnet')
                if sys.modules.get(m) is not None])
'''


def _run_actor(tmp_path, agent, config, weights, address, build_actor):
  weights_file = os.path.join(tmp_path, 'weights.npz')
  np.savez(weights_file, **weights)
  code = _ACTOR_PROCESS.format(
      agent=agent, config=config, weights_file=weights_file,
      address=address, build_actor=textwrap.dedent(build_actor))
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120, check=False)
  output = result.stdout + result.stderr
  assert result.returncode == 0, output
  assert 'HEAVY []' in result.stdout, output


def _first_steps(items):
  """Observations and actions of steps 0 .. T - 1 (T + 1 per unroll)."""
  for item in items:
    yield item, (np.asarray(item['observation'])[:-1],
                 np.asarray(item['action'])[:-1])


def test_ppo_actor(tmp_path):
  with networks.seeded(0):
    network = mlp_policy.make_network(
        PPO['hidden_sizes'], CATCH.observations, CATCH.actions,
        PPO['network'])
  config = ppo.Config(**PPO)
  tables = ppo_program.make_tables(config, CATCH, 1, 2)
  with testing.reverb_server(tables) as client:
    _run_actor(tmp_path, 'ppo', PPO, networks.get_variables(network),
               client.server_address, '''
        from repertory.agents.ppo import acting
        actor = acting.PPOActor(0, config, 'catch', 2, seed=0,
                                replay=replay, learner=learner)
        actor.collect_round(actor.wait_for_round(None))
    ''')
    items = testing.read_queue(client, ppo_program.QUEUE)
  assert len(items) == 1  # The actor's two unrolls, as one item.
  unrolls = list(_per_environment(items))
  assert len(unrolls) == 2
  for item, (observation, action) in _first_steps(unrolls):
    logits = network(tf.constant(observation)).logits
    expected = tf.nn.log_softmax(logits).numpy()[np.arange(len(action)),
                                                 action]
    np.testing.assert_allclose(np.asarray(item['extras']['log_prob'])[:-1],
                               expected, atol=1e-5)


def _per_environment(items):
  """Items of one environment's unroll each (batched items split)."""
  for item in items:
    if np.ndim(item['policy_version']) == 0:
      yield item
      continue
    for e in range(len(item['policy_version'])):
      yield tree.map_structure(lambda x, e=e: np.asarray(x)[e], item)


def _impala_settings(use_lstm):
  if use_lstm:
    return dict(IMPALA, use_lstm=True, shared_torso=True, lstm_size=8)
  return dict(IMPALA)


def _network_and_tables(config):
  """The learner's network (seeded) and the queue of 2 envs per actor."""
  with networks.seeded(0):
    network = actor_critic_nets.make_network(config, CATCH.observations,
                                             CATCH.actions)
  return network, actor_critic_tables.make_tables(config, CATCH,
                                                  envs_per_actor=2)


def _check_behaviour_logits(items, network, use_lstm):
  """The logits stored in per-environment items are the network's on the
  items' observations (an LSTM's: its first step, from the stored state)."""
  for item, (observation, _) in _first_steps(items):
    if use_lstm:  # The state stored is the one before the item's first
      # step, zeroed there if an episode starts (step type FIRST = 0).
      keep = float(np.asarray(item['step_type'])[0] != 0)
      state = type(network.initial_state(1))(
          *(keep * np.asarray(x)[None] for x in item['core_state']))
      logits = network(tf.constant(observation[:1]), state)[0].logits.numpy()
      steps = 1
    else:
      logits, steps = network(tf.constant(observation)).logits.numpy(), -1
    np.testing.assert_allclose(
        np.asarray(item['extras']['logits'])[:steps], logits, atol=1e-5)


@pytest.mark.parametrize('use_lstm, batched_items', [
    (False, False), (True, False), (True, True)])
def test_impala_actor(tmp_path, use_lstm, batched_items):
  settings = dict(_impala_settings(use_lstm), batched_items=batched_items)
  network, tables = _network_and_tables(impala.Config(**settings))
  with testing.reverb_server(tables) as client:
    _run_actor(tmp_path, 'impala', settings, networks.get_variables(network),
               client.server_address, f'''
        from repertory.agents.impala import acting
        actor = acting.ImpalaActor(0, config, 'catch', 2, seed=0,
                                   learner=learner, replay=replay,
                                   table={actor_critic_tables.TABLE!r})
        actor.run(num_steps=11)  # Two unrolls of 5 steps per environment.
    ''')
    items = list(_per_environment(
        testing.read_queue(client, actor_critic_tables.TABLE)))
  assert len(items) >= 2
  _check_behaviour_logits(items, network, use_lstm)


@pytest.mark.parametrize('use_lstm', [False, True])
def test_seed_inference_server(tmp_path, use_lstm):
  # SEED's server evaluates the learner's network in numpy: with
  # inference_placement='separate' its process needs no TensorFlow.
  settings = _impala_settings(use_lstm)
  network, tables = _network_and_tables(seed_agent.Config(**settings))
  with testing.reverb_server(tables) as client:
    _run_actor(tmp_path, 'seed', settings, networks.get_variables(network),
               client.server_address, f'''
        import functools
        from repertory import environments
        from repertory.agents.seed import acting, networks
        from repertory.components import adders, inference
        from repertory.agents.actor_critic import numpy_policy
        env = environments.make_batched('catch', 2, seed=0)
        state_spec = (numpy_policy.lstm_state_spec(config.lstm_size)
                      if config.use_lstm else None)
        server = inference.InferenceServer(
            functools.partial(networks.make_policy, config, None), learner,
            replay, {actor_critic_tables.TABLE!r}, config.unroll_length, 2,
            environment_spec=adders.EnvironmentSpec(
                env.observation_spec(), env.action_spec(), None, None),
            extras_spec={{'logits': np.zeros((3,), np.float32)}},
            core_state_spec=state_spec, batched_items=True,
            weights_transport='tcp')  # As a separate server fetches.
        actor = acting.SeedActor(0, 'catch', 2, 0, server, transport='handle')
        actor.run(num_steps=11)  # Two unrolls of 5 steps per environment.
    ''')
    items = list(_per_environment(
        testing.read_queue(client, actor_critic_tables.TABLE)))
  assert len(items) == 4
  _check_behaviour_logits(items, network, use_lstm)


@pytest.mark.parametrize('config', [IMPALA, dict(IMPALA, shared_torso=True,
                                                 activation='relu')])
def test_impala_networks_in_numpy(config):
  from repertory.agents.actor_critic import numpy_policy  # pylint: disable=g-import-not-at-top
  config = impala.Config(**config)
  network = actor_critic_nets.make_network(config, CATCH.observations,
                                           CATCH.actions)
  policy = numpy_policy.LogitsPolicy(activation=config.activation)
  policy.set_weights(networks.get_variables(network))
  observation = np.random.default_rng(0).normal(size=(8, 50)).astype(
      np.float32).reshape((8,) + CATCH.observations.shape)
  expected = network(tf.constant(observation))
  logits, values = policy.outputs(observation)
  np.testing.assert_allclose(logits, expected.logits.numpy(), atol=1e-5)
  np.testing.assert_allclose(values, expected.value.numpy(), atol=1e-5)
  _, extras, _ = policy.step(observation, (), None)
  np.testing.assert_allclose(extras['logits'], logits)


def test_neurd_actor_module_without_tensorflow():
  # Its actor and evaluation actor act in numpy (the league plays its
  # snapshots with the evaluation actor).
  code = textwrap.dedent('''
      import sys
      sys.modules['tensorflow'] = None
      from repertory.agents.neurd import acting
      print('ACTOR', acting.NeuRDActor.__name__, acting.EvalActor.__name__)
  ''')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120, check=False)
  assert 'ACTOR NeuRDActor EvalActor' in result.stdout, (result.stdout +
                                                         result.stderr)
