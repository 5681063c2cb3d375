"""The TensorBoard event files of a real run, read back as TensorBoard
reads them: every node's tags under its own name, keyed by actor steps and
(in by_learner_steps/) by learner steps; the learner's by its own steps."""

import csv
import os

import pytest

from tensorboard.backend.event_processing import event_accumulator

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import impala


def _scalars(path: str):
  """tag -> [(step, value)] of the event files in `path`."""
  accumulator = event_accumulator.EventAccumulator(
      path, size_guidance={event_accumulator.SCALARS: 0})
  accumulator.Reload()
  return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
          for tag in accumulator.Tags()['scalars']}


def test_every_node_has_its_event_files_tags_and_steps(tmp_path):
  logdir = str(tmp_path)
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='catch', num_actors=1, envs_per_actor=2,
      max_actor_steps=3_000, eval_episodes=2, eval_every_steps=1_000,
      logdir=logdir, launch_type='test_mt', progress_every_seconds=0.3,
      stop_at_return=None)
  config = impala.Config(unroll_length=4, batch_size=2, hidden_sizes=(16,),
                         max_queue_size=8)
  launched = launch.launch(impala.make_program(config, experiment),
                           launch_type='test_mt', termination_notice_secs=5)
  assert launched.wait(timeout=240)
  with open(os.path.join(logdir, 'progress.csv')) as f:
    rows = list(csv.DictReader(f))
  progress = [r for r in rows if not r.get('eval_return_mean')]
  evaluations = [r for r in rows if r.get('eval_return_mean')]
  assert len(progress) >= 2 and evaluations
  board = os.path.join(logdir, 'tensorboard')

  # The monitor's and the actors' rows: one event per progress row, at its
  # actor steps; the same rows at their learner steps in by_learner_steps/.
  for node, tag in (('monitor', 'monitor/actor_steps_per_second'),
                    ('actor', 'actor/episode_return_mean')):
    for subdir, key in ((node, 'actor_steps'),
                        (os.path.join('by_learner_steps', node),
                         'learner_steps')):
      scalars = _scalars(os.path.join(board, subdir))
      assert all(t.startswith(node + '/') for t in scalars), scalars.keys()
      assert [s for s, _ in scalars[tag]] == [int(r[key]) for r in progress]
  actor = _scalars(os.path.join(board, 'actor'))
  assert {'actor/episode_return', 'actor/episode_length',
          'actor/episodes'} <= set(actor)
  assert all(-1 <= v <= 1 for _, v in actor['actor/episode_return'])
  assert 'monitor/tables/queue/size' in _scalars(os.path.join(board, 'monitor'))

  # The evaluator's: one event per evaluation (the periodic ones, then the
  # final one), at the actor steps and at the learner steps of its weights.
  for subdir, key in (('evaluator', 'actor_steps'),
                      (os.path.join('by_learner_steps', 'evaluator'),
                       'learner_steps')):
    scalars = _scalars(os.path.join(board, subdir))
    assert {'evaluator/return_mean', 'evaluator/return_std',
            'evaluator/length_mean'} <= set(scalars)
    expected = [(int(r[key]), float(r['eval_return_mean']))
                for r in evaluations]
    got = scalars['evaluator/return_mean']
    assert [s for s, _ in got] == [s for s, _ in expected]
    # TensorBoard keeps float32: equal to its precision.
    assert [v for _, v in got] == pytest.approx([v for _, v in expected],
                                                rel=1e-6)

  # The learner's: by its own step count (not the row index), which its
  # rows also carry as learner/steps.
  learner = _scalars(os.path.join(logdir, 'learner', 'tensorboard',
                                  'learner'))
  assert 'learner/losses/total' in learner
  steps = learner['learner/steps']
  assert [s for s, _ in steps] == [int(v) for _, v in steps]
  assert [s for s, _ in learner['learner/losses/total']] == [
      s for s, _ in steps]
  assert steps[-1][0] >= 2
