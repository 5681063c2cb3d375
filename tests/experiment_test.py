"""An agent runs on a user's environment factory, in a program, unchanged."""

import csv
import json
import os

import pytest
from tensorboard.backend.event_processing import event_accumulator

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
      max_actor_steps=200, eval_episodes=2,
      final_eval_episodes=2, eval_fraction=1.0, logdir=str(tmp_path),
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


def test_impala_stops_exactly_at_its_budget_and_evaluates_periodically(
    tmp_path):
  """The actors take their steps from the monitor's budget: the run ends
  within one batched step per actor of `max_actor_steps`; the evaluator node
  leaves evaluation rows in progress.csv and TensorBoard scalars."""
  num_actors, envs, budget = 2, 3, 6_001
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='catch', num_actors=num_actors,
      envs_per_actor=envs, max_actor_steps=budget, eval_episodes=2,
      final_eval_episodes=2, eval_fraction=1.0,
      eval_every_steps=1_000, logdir=str(tmp_path), launch_type='test_mt',
      progress_every_seconds=0.5,
      stop_at_return=None)  # The budget ends it (a solve could come first).
  config = impala.Config(unroll_length=4, batch_size=2, hidden_sizes=(16,),
                         max_queue_size=8)
  launched = launch.launch(impala.make_program(config, experiment),
                           launch_type='test_mt', termination_notice_secs=5)
  assert launched.wait(timeout=240)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert budget <= results['actor_steps'] <= budget + num_actors * (envs - 1)
  with open(os.path.join(tmp_path, 'progress.csv')) as f:
    rows = [r for r in csv.DictReader(f) if r.get('eval_return_mean')]
  # The periodic ones (when the run lasted long enough), then the final one.
  assert rows and int(rows[-1]['actor_steps']) == results['actor_steps']
  assert all(int(r['actor_steps']) >= 1_000 for r in rows)
  accumulator = event_accumulator.EventAccumulator(
      os.path.join(tmp_path, 'tensorboard', 'evaluator'))
  accumulator.Reload()
  assert 'evaluator/return_mean' in accumulator.Tags()['scalars']
  events = accumulator.Scalars('evaluator/return_mean')
  assert [e.step for e in events] == [int(r['actor_steps']) for r in rows]


def test_a_name_registered_here_is_refused_where_nodes_cannot_see_it():
  environments.register('small_catch_for_test', make_small_catch)
  try:
    for launch_type in ('local_mp', 'ray'):
      with pytest.raises(ValueError, match=(
          "Environment 'small_catch_for_test' is registered in this process "
          'only.*env=make_small_catch')):
        experiment_lib.ExperimentConfig(env='small_catch_for_test',
                                        launch_type=launch_type)
    # Threads share the registry; a factory is pickled to every node.
    experiment_lib.ExperimentConfig(env='small_catch_for_test',
                                    launch_type='local_mt')
    experiment_lib.ExperimentConfig(env=make_small_catch,
                                    launch_type='local_mp')
  finally:
    del environments.registry._REGISTRY['small_catch_for_test']  # pylint: disable=protected-access
