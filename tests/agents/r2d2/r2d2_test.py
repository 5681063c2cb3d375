"""R2D2: config validation, the actor's priority against the learner's loss,
the stored state, the program in test_mt (learner stepped by hand), and a
slow learning test on the memory task."""

import json
import os
import time

import numpy as np
import portpicker
import pytest
import reverb
import sonnet as snt
import tensorflow as tf

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import r2d2
from repertory.agents.r2d2 import acting
from repertory.agents.r2d2 import networks
from repertory.agents.r2d2 import program as program_lib
from repertory.components import variables as variables_lib
from repertory.components.networks import variables as network_variables

TINY = dict(torso_sizes=(16,), lstm_size=8, head_sizes=(16,), burn_in=2,
            trace_length=3, sequence_period=2, batch_size=4,
            min_replay_size=8, replay_size=500, samples_per_insert=1.0,
            samples_per_insert_tolerance=50.0, target_update_period=2)


@pytest.mark.parametrize('field, value, message', [
    ('trace_length', 0, 'trace_length must be >= 1'),
    ('burn_in', -1, 'burn_in must be >= 0'),
    ('sequence_period', 20, 'exceeds trace_length'),
    ('priority_eta', 1.5, r'priority_eta must be in \[0, 1\]'),
    ('initial_priority', 'max', 'choose one of'),
    ('min_replay_size', 10**9, 'exceeds replay_size'),
])
def test_config_rejects_bad_values(field, value, message):
  with pytest.raises(ValueError, match=message):
    r2d2.Config(**{field: value})


def test_config_sequence_length_with_and_without_burn_in():
  config = r2d2.Config(burn_in=4, trace_length=10)
  assert config.sequence_length == 15
  assert r2d2.Config(burn_in=4, trace_length=10,
                     use_burn_in=False).sequence_length == 11


def _experiment(tmp_path, env='catch', **kwargs):
  values = dict(agent='r2d2', env=env, num_actors=2, envs_per_actor=2,
                max_actor_steps=10_000_000, eval_episodes=2,
                logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


def test_stored_state_is_the_state_the_actor_had(tmp_path):
  """Replaying an item's observations from its stored state reproduces the
  Q-values the actor computed at every step (same weights)."""
  config = r2d2.Config(**TINY)
  env = 'catch'  # Short episodes: sequences cross episode boundaries.
  experiment = _experiment(tmp_path, env=env, num_actors=1)
  spec = program_lib.environment_spec(env)
  network = networks.make_network(spec, config)
  store = variables_lib.VariableStore(
      {'policy': network_variables.get_variables(network)})
  server = reverb.Server(program_lib.make_tables(config, spec),
                         port=portpicker.pick_unused_port())
  try:
    client = reverb.Client(f'localhost:{server.port}')
    actor = acting.R2D2Actor(0, config, experiment, networks.make_network,
                             client, program_lib.TABLE, store)
    for _ in range(20):
      actor.step()
    actor.flush()
    actor.close()
    info = client.server_info()[program_lib.TABLE]
    size = info.current_size
    assert size >= 8
    samples = list(client.sample(program_lib.TABLE, num_samples=size,
                                 emit_timesteps=False))
    nonzero_states = 0
    for sample in samples:
      data = tf.nest.pack_sequence_as(info.signature, sample.data)
      state = snt.LSTMState(
          hidden=tf.constant(data['core_state']['hidden'][None]),
          cell=tf.constant(data['core_state']['cell'][None]))
      nonzero_states += int(np.any(data['core_state']['hidden'] != 0))
      oar = tf.nest.map_structure(lambda x: x[:, None], data['observation'])
      reset = tf.constant(data['step_type'][:, None] == 0)
      q_values, _ = network.unroll(oar, state, reset)
      valid = data['step_type'] != 2  # Steps the actor chose an action on.
      np.testing.assert_allclose(q_values.numpy()[:, 0][valid],
                                 data['extras']['q_values'][valid],
                                 rtol=1e-4, atol=1e-5)
    assert nonzero_states > 0
  finally:
    server.stop()


def test_eval_actor_is_the_network_stepped_on_what_it_observed():
  """The evaluation actor's greedy actions over ten episodes of catch are
  the argmax of the eager network stepped on (observation, previous action,
  previous reward) from the zero state, reset at each episode's start."""
  config = r2d2.Config(**TINY, eval_epsilon=0.0)
  spec = program_lib.environment_spec('catch')
  network = networks.make_network(spec, config)
  rng = np.random.RandomState(0)  # Large weights, no biases: the actions
  for variable in network.trainable_variables:  # vary over an episode.
    scale = 0.0 if variable.shape.rank == 1 else 1.0
    variable.assign(scale * rng.normal(size=variable.shape).astype(np.float32))
  store = variables_lib.VariableStore(
      {'policy': network_variables.get_variables(network)})
  actor = acting.make_eval_actor(spec, config, networks.make_network, store)
  actor.update(wait=True)
  env = environments.make('catch', seed=0)
  taken = set()
  for _ in range(10):
    timestep = env.reset()
    actor.observe_first(timestep)
    state = network.initial_state(1)
    action, reward = np.zeros((), np.int32), np.zeros((), np.float32)
    while not timestep.last():
      oar = environments.OAR(np.asarray(timestep.observation)[None],
                             action[None], reward[None])
      q_values, state = network(oar, state)
      action = np.asarray(actor.select_action(timestep.observation))
      assert action == int(np.argmax(q_values.numpy()[0]))
      taken.add(int(action))
      timestep = env.step(action)
      actor.observe(action, timestep)
      action = action.astype(np.int32)
      reward = np.asarray(timestep.reward, np.float32)
  assert len(taken) > 1  # The comparison can tell actions apart.


def test_program_in_test_mt_learner_by_hand(tmp_path):
  # A tiny insert priority: the items the learner updated dominate sampling.
  config = r2d2.Config(initial_priority='constant', constant_priority=1e-3,
                       **TINY)
  experiment = _experiment(tmp_path)
  program = r2d2.make_program(config, experiment)
  assert set(program.groups) == {'replay', 'counter', 'learner', 'monitor',
                                 'evaluator', 'actor'}
  learner_node = program.groups['learner'][0]
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  try:
    learner = learner_node.create_handle().dereference()
    counter = program.groups['counter'][0].create_handle().dereference()
    replay = program.groups['replay'][0].create_handle().dereference()
    versions = []
    for _ in range(3):
      learner.step()
      versions.append(learner.get_variables(['policy']).version)
    learner.flush_counts()
    learner.flush()
    assert versions == sorted(versions) and versions[-1] >= 3
    deadline = time.monotonic() + 60
    counts = {}
    while time.monotonic() < deadline:
      counts = counter.get_counts()
      if counts.get('learner_steps', 0) >= 3 and counts.get('actor_steps'):
        break
      time.sleep(0.2)
    assert counts['learner_steps'] == 3
    assert counts['policy_lag_items'] == 3 * config.batch_size
    priorities = [s.info.priority for s in replay.sample(
        program_lib.TABLE, num_samples=64, emit_timesteps=False)]
    assert any(abs(p - 1e-3) > 1e-6 for p in priorities), priorities
  finally:
    launched.stop(timeout=60)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_learns_the_memory_task_with_stored_state_and_burn_in(tmp_path):
  """bsuite memory_len/9 (memory length 10) in local_mt."""
  config = r2d2.Config()
  experiment = _experiment(tmp_path, env='bsuite:memory_len/9',
                           launch_type='local_mt', num_actors=2,
                           envs_per_actor=8, max_actor_steps=60_000,
                           stop_at_return=None, eval_episodes=50)
  launch.launch(r2d2.make_program(config, experiment),
                launch_type='local_mt')
  with open(os.path.join(str(tmp_path), 'results.json')) as f:
    results = json.load(f)
  assert results['eval_return_mean'] >= 0.9, results
