"""examples/custom_environment.py: both environments through `make`, a
built-in agent training on them in test_mt, and the command line."""

import json
import os
import subprocess
import sys

import dm_env
import numpy as np
import pytest

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch


@pytest.fixture
def custom_environment(load_example):
  module = load_example('custom_environment')
  module.register()  # Idempotent: register replaces a name's factory.
  return module


def _play(environment, policy):
  timestep, steps, total = environment.reset(), 0, 0.0
  while not timestep.last():
    timestep = environment.step(policy(timestep.observation))
    steps, total = steps + 1, total + timestep.reward
  return timestep, steps, total


def test_corridor_through_make_and_a_batch(custom_environment):
  env = environments.make('corridor', seed=0)
  assert env.observation_spec().shape == (5,)
  assert env.action_spec().num_values == 2
  timestep, steps, total = _play(env, lambda observation: 1)  # Always right.
  assert (steps, total, timestep.discount) == (4, 1.0, 0.0)  # Termination.
  timestep, steps, total = _play(env, lambda observation: 0)  # Always left.
  assert (steps, total, timestep.discount) == (10, 0.0, 1.0)  # Truncation.
  assert env.step(1).first()  # dm_env: the step after LAST starts anew.
  # The factory itself works wherever a spec does.
  batch = environments.make_batched(custom_environment.make_corridor, 3, seed=0)
  batch.reset()
  for _ in range(4):
    timestep = batch.step(np.ones(3, np.int32))
  assert list(timestep.step_type) == [int(dm_env.StepType.LAST)] * 3
  batch.close()


def test_gymnasium_environment_is_adapted_and_seeded(custom_environment):
  env = environments.make('match_sign', seed=7)
  assert isinstance(env, dm_env.Environment)
  timestep, steps, total = _play(
      env, lambda observation: int(observation[0] > 0))
  assert (steps, total) == (10, 10.0)  # Always right answers.
  first = environments.make('match_sign', seed=7).reset().observation
  again = environments.make(custom_environment.make_match_sign,
                            seed=7).reset().observation
  np.testing.assert_array_equal(first, again)


def test_impala_trains_on_the_registered_environment_in_test_mt(
    tmp_path, custom_environment):
  from repertory.agents import impala  # pylint: disable=g-import-not-at-top
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='corridor', num_actors=2, envs_per_actor=2,
      max_actor_steps=400, eval_episodes=2,
      final_eval_episodes=2, eval_fraction=1.0, logdir=str(tmp_path),
      launch_type='test_mt', progress_every_seconds=0.5)
  config = impala.Config(unroll_length=5, batch_size=2, max_queue_size=8,
                         hidden_sizes=(16,))
  launched = launch.launch(impala.make_program(config, experiment),
                           launch_type='test_mt', termination_notice_secs=5)
  assert launched.wait(timeout=240)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['env'] == 'corridor'
  assert results['actor_steps'] >= 400
  assert results['learner_steps'] >= 1
  assert results['episodes'] >= 1
  assert results['eval_episodes'] == 2
  assert 0.0 <= results['eval_return_mean'] <= 1.0


def test_command_line_refuses_other_processes(example_path):
  result = subprocess.run(
      [sys.executable, example_path('custom_environment'),
       '--lp_launch_type=local_mp'], capture_output=True, text=True,
      timeout=120)
  assert result.returncode != 0
  assert 'use --lp_launch_type=local_mt' in result.stderr


@pytest.mark.slow
def test_ppo_learns_the_gymnasium_environment_from_the_command_line(
    tmp_path, example_path):
  logdir = os.path.join(tmp_path, 'run')
  result = subprocess.run(
      [sys.executable, example_path('custom_environment'), '--agent=ppo',
       '--env=match_sign', '--lp_launch_type=local_mt', '--stop_at_return=8.5',
       '--max_actor_steps=200000', f'--logdir={logdir}'],
      capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  assert results['env'] == 'match_sign'
  assert results['eval_return_mean'] >= 9.0, results
