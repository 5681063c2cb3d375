"""Ape-X: config validation, the epsilon schedule, the actor's priority
against the learner's loss, the program in test_mt (learner stepped by hand),
and a slow learning test on catch."""

import json
import os
import time

import dm_env
import numpy as np
import pytest
import tensorflow as tf

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import apex
from repertory.agents.apex import acting
from repertory.agents.apex import program as program_lib
from repertory.components import losses

TINY = dict(torso_sizes=(16,), head_sizes=(16,), batch_size=8,
            min_replay_size=16, replay_size=500, samples_per_insert=1.0,
            samples_per_insert_tolerance=20.0, target_update_period=2)


@pytest.mark.parametrize('field, value, message', [
    ('n_step', 0, 'n_step must be >= 1'),
    ('discount', 1.5, r'discount must be in \[0, 1\]'),
    ('initial_priority', 'max', 'choose one of'),
    ('min_replay_size', 10**9, 'exceeds replay_size'),
    ('learning_rate', 0.0, 'learning_rate must be > 0'),
])
def test_config_rejects_bad_values(field, value, message):
  with pytest.raises(ValueError, match=message):
    apex.Config(**{field: value})


def test_epsilon_schedule_follows_the_paper():
  eps = [apex.apex_epsilon(i, 8, 0.4, 7.0) for i in range(8)]
  assert eps[0] == pytest.approx(0.4)
  assert eps[-1] == pytest.approx(0.4 ** 8)
  assert eps[3] == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
  assert all(a > b for a, b in zip(eps, eps[1:]))
  assert apex.apex_epsilon(0, 1, 0.4, 7.0) == pytest.approx(0.4)
  with pytest.raises(ValueError, match='actor_id'):
    apex.apex_epsilon(8, 8)


def test_actor_priority_is_the_double_q_td_error_of_the_actor_network():
  rng = np.random.RandomState(0)
  q_t, q_next = rng.randn(1, 3), rng.randn(1, 3)
  item = {'reward': np.float32(0.7), 'discount': np.float32(0.97 ** 3),
          'extras': {'q_taken': np.float32(q_t[0, 2])}}
  priority = acting.ApexPriority()
  priority.bootstrap_value = float(q_next.max())
  td = losses.double_q_learning(tf.constant(q_t), tf.constant([2]),
                                tf.constant([0.7]), tf.constant([0.97 ** 3]),
                                tf.constant(q_next), tf.constant(q_next))
  assert priority(item) == pytest.approx(abs(float(td.td_error[0])) + 1e-6,
                                         rel=1e-5)


def _experiment(tmp_path, env='catch', **kwargs):
  values = dict(agent='apex', env=env, num_actors=2, envs_per_actor=2,
                max_actor_steps=10_000_000, eval_episodes=2,
                logdir=str(tmp_path), launch_type='test_mt',
                progress_every_seconds=0.5)
  values.update(kwargs)
  return experiment_lib.ExperimentConfig(**values)


def test_program_in_test_mt_learner_by_hand(tmp_path):
  # A tiny insert priority: the items the learner updated dominate sampling.
  config = apex.Config(initial_priority='constant', constant_priority=1e-3,
                       **TINY)
  experiment = _experiment(tmp_path)
  program = apex.make_program(config, experiment)
  assert set(program.groups) == {'replay', 'counter', 'learner', 'monitor',
                                 'actor'}
  assert len(program.groups['actor']) == 2
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
    assert versions == [1, 2, 3]
    deadline = time.monotonic() + 60
    counts = {}
    while time.monotonic() < deadline:
      counts = counter.get_counts()
      if counts.get('learner_steps', 0) >= 3 and counts.get('actor_steps'):
        break
      time.sleep(0.2)
    assert counts['learner_steps'] == 3
    assert counts['policy_lag_items'] == 3 * config.batch_size
    assert counts['actor_steps'] > 0
    priorities = [s.info.priority for s in replay.sample(
        program_lib.TABLE, num_samples=32, emit_timesteps=False)]
    assert any(abs(p - 1e-3) > 1e-6 for p in priorities), priorities
  finally:
    launched.stop(timeout=60)


def test_actor_priorities_are_written_with_the_items(tmp_path):
  config = apex.Config(**TINY)
  experiment = _experiment(tmp_path, num_actors=1)
  program = apex.make_program(config, experiment)
  program.groups['learner'][0].disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  try:
    replay = program.groups['replay'][0].create_handle().dereference()
    deadline = time.monotonic() + 60
    while (replay.server_info()[program_lib.TABLE].current_size <
           config.min_replay_size):
      assert time.monotonic() < deadline
      time.sleep(0.2)
    samples = list(replay.sample(program_lib.TABLE, num_samples=8,
                                 emit_timesteps=False))
    priorities = [s.info.priority for s in samples]
    assert len(set(np.round(priorities, 6))) > 1, priorities
    assert all(p > 0 for p in priorities)
  finally:
    launched.stop(timeout=60)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_learns_catch(tmp_path):
  """Ape-X on catch in local_mt."""
  config = apex.Config()
  experiment = _experiment(tmp_path, launch_type='local_mt', num_actors=2,
                           envs_per_actor=8, max_actor_steps=40_000,
                           stop_at_return=None, eval_episodes=50)
  launch.launch(apex.make_program(config, experiment), launch_type='local_mt')
  with open(os.path.join(str(tmp_path), 'results.json')) as f:
    results = json.load(f)
  assert results['eval_return_mean'] >= 0.9, results
