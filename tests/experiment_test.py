"""An agent runs on a user's environment factory, in a program, unchanged."""

import json
import os

from repertory import environments
from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import impala


def make_small_catch(seed=None):
  """A module-level factory: pickled by reference to every node."""
  return environments.Catch(rows=5, columns=3, seed=seed)


def test_env_name():
  assert experiment_lib.env_name('gym:CartPole-v1') == 'gym:CartPole-v1'
  assert experiment_lib.env_name(make_small_catch) == 'make_small_catch'


def test_environment_spec_of_a_spec_string_and_of_a_factory():
  spec = experiment_lib.environment_spec('catch')
  assert spec.observations.shape == (10, 5) and spec.actions.num_values == 3
  assert spec.rewards is not None and spec.discounts is not None
  small = experiment_lib.environment_spec(make_small_catch)
  assert small.observations.shape == (5, 3)


def test_impala_runs_on_a_factory_and_records_its_name(tmp_path):
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env=make_small_catch, num_actors=1, envs_per_actor=2,
      max_actor_steps=200, eval_episodes=2, logdir=str(tmp_path),
      launch_type='test_mt', progress_every_seconds=0.5)
  config = impala.Config(unroll_length=4, batch_size=2, hidden_sizes=(16,),
                         max_queue_size=8)
  launched = launch.launch(impala.make_program(config, experiment),
                           launch_type='test_mt', termination_notice_secs=5)
  assert launched.wait(timeout=240)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['env'] == 'make_small_catch'
  assert results['actor_steps'] >= 200
  assert results['eval_episodes'] == 2
