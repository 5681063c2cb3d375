"""SEED resumes like IMPALA (the same V-trace learner and pieces): a second
launch with the same logdir continues the learner's steps and version, the
counts, and refills the queue from its Reverb checkpoint."""

import os

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import seed
from repertory.agents.actor_critic import networks
from repertory.components import checkpointing
from repertory.components import counting
from repertory.components import model_store

TINY = dict(unroll_length=5, batch_size=4, max_queue_size=16,
            hidden_sizes=(16,), learner_log_every=1)
CHECKPOINT = checkpointing.CheckpointSettings(every_steps=2,
                                              every_minutes=None)


def _launch(logdir):
  experiment = experiment_lib.ExperimentConfig(
      agent='seed', env='catch', num_actors=2, envs_per_actor=2,
      max_actor_steps=10**9, logdir=str(logdir), launch_type='test_mt',
      checkpoint=CHECKPOINT)
  program = seed.make_program(seed.Config(**TINY), experiment)
  learner_node = program.groups['learner'][0].nodes[0]
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=10)
  learner = learner_node.create_handle().dereference()
  counter = program.groups['counter'][0].create_handle().dereference()
  return launched, learner, counter


def test_second_launch_continues_steps_version_and_counts(tmp_path):
  launched, learner, _ = _launch(tmp_path)
  try:
    steps = [testing.wait_until(learner.step, 'a batch')['learner/steps']
             for _ in range(3)]
    assert steps == [1, 2, 3]
    assert learner.get_variables([networks.POLICY]).version == 3
    learner.flush_counts()
  finally:
    launched.stop(timeout=60)
  # The stop handlers wrote a final checkpoint, the policy snapshot, the
  # counts and a Reverb checkpoint of the queue.
  latest = model_store.ModelStore(os.path.join(tmp_path, 'checkpoints'),
                                  {}).latest()
  assert (latest.version, latest.step) == (3, 3)
  assert os.path.isdir(tmp_path / 'snapshot')
  assert os.listdir(tmp_path / 'replay')
  first_counts = counting.Counter(
      checkpoint_path=str(tmp_path / 'counts.json')).get_counts()
  assert first_counts['learner_steps'] == 3

  launched, learner, counter = _launch(tmp_path)
  try:
    assert learner.get_variables([networks.POLICY]).version == 3
    metrics = testing.wait_until(learner.step, 'a batch')
    assert metrics['learner/steps'] == 4
    assert metrics['learner/version'] == 4
    learner.flush_counts()
    counts = counter.get_counts()
    assert counts['learner_steps'] == 4
    assert counts['actor_steps'] >= first_counts['actor_steps']
  finally:
    launched.stop(timeout=60)
