"""One run, every output: results.json, counts.json, the last progress row,
its TensorBoard points, the last progress line and episodes.csv hold the
same actor steps, learner steps and episodes; evaluations come on their
schedule (within one batched actor step), name the policy version they
evaluated, carry a 95% interval, and cost at most their share of steps."""

import csv
import json
import os
import re

from tensorboard.backend.event_processing import event_accumulator

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import impala

EVERY = 1_000
ENVS = 4


def _last_scalar(path: str, tag: str) -> float:
  accumulator = event_accumulator.EventAccumulator(
      path, size_guidance={event_accumulator.SCALARS: 0})
  accumulator.Reload()
  return accumulator.Scalars(tag)[-1].value


def test_every_output_of_one_run_holds_the_same_counts(tmp_path):
  logdir = str(tmp_path)
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='catch', num_actors=2, envs_per_actor=ENVS,
      max_actor_steps=6_000, eval_episodes=20, eval_every_steps=EVERY,
      final_eval_episodes=30, logdir=logdir, launch_type='test_mt',
      progress_every_seconds=0.5, stop_at_return=None)
  config = impala.Config(unroll_length=4, batch_size=2, hidden_sizes=(16,),
                         max_queue_size=8)
  launched = launch.launch(impala.make_program(config, experiment),
                           launch_type='test_mt', termination_notice_secs=5)
  assert launched.wait(timeout=300)
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  with open(os.path.join(logdir, 'counts.json')) as f:
    counts = json.load(f)
  with open(os.path.join(logdir, 'progress.csv')) as f:
    rows = list(csv.DictReader(f))
  with open(os.path.join(logdir, 'episodes.csv')) as f:
    episodes = list(csv.DictReader(f))
  last = [r for r in rows if not r.get('eval_return_mean')][-1]
  with open(os.path.join(logdir, 'progress.log')) as f:
    lines = [l for l in f if ' actor_steps=' in l and '[' in l]

  assert 6_000 <= results['actor_steps'] < 6_000 + ENVS
  for key in ('actor_steps', 'learner_steps', 'episodes',
              'evaluation_steps'):
    assert counts[key] == results[key], key
    assert int(last[key]) == results[key], key
  assert len(episodes) == results['episodes'] > 0
  line = re.search(r'actor_steps=(\d+) .* learner_steps=(\d+) episodes=(\d+)',
                   lines[-1])
  assert tuple(map(int, line.groups())) == (
      results['actor_steps'], results['learner_steps'], results['episodes'])
  board = os.path.join(logdir, 'tensorboard')
  assert _last_scalar(os.path.join(board, 'monitor'),
                      'monitor/learner_steps') == results['learner_steps']
  assert _last_scalar(os.path.join(board, 'actor'),
                      'actor/episodes') == results['episodes']

  # The final evaluation: the weights the learner served when it halted.
  assert results['eval_policy_version'] == results['learner_version']
  assert results['eval_episodes'] == 30
  assert (results['eval_return_ci95_low'] <= results['eval_return_mean'] <=
          results['eval_return_ci95_high'])
  periodic = [r for r in rows if r.get('eval_return_mean')][:-1]
  assert len(periodic) >= 4
  for row in periodic:
    steps = int(row['actor_steps'])
    assert steps % EVERY < ENVS, steps  # At the point, within a batch.
    assert row['eval_policy_version'] and row['eval_return_ci95_low']
    # At most 10% of the training steps since the previous one (catch's
    # episodes are 9 steps: whole episodes).
    assert int(row['eval_steps']) <= 0.1 * EVERY
  versions = [int(r['eval_policy_version']) for r in periodic]
  assert versions == sorted(versions)
  assert results['evaluation_steps'] == sum(int(r['eval_steps']) for r in periodic)
