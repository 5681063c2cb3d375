"""A damaged run directory, part by part: each damaged part is named in one
line before any node starts, then set aside (the newest readable one used)
or the run refused; nothing is lost and nothing resumes silently from
scratch. The same checks apply to `run_experiment` and `python -m
repertory.run` (both call `rundir.preflight_run`)."""

import glob
import json
import os
import shutil

import numpy as np
import portpicker
import pytest
import reverb
import tensorflow as tf

from repertory import experiment as experiment_lib
from repertory import rundir
from repertory.agents import apex
from repertory.agents import impala
from repertory.components import checkpointing

BUDGET = 300


def _experiment(logdir, agent='impala', budget=BUDGET):
  return experiment_lib.ExperimentConfig(
      agent=agent, env='catch', num_actors=1, envs_per_actor=2,
      max_actor_steps=budget, eval_episodes=1, eval_every_steps=0,
      stop_at_return='never', logdir=str(logdir), launch_type='test_mt',
      progress_every_seconds=1.0,
      checkpoint=checkpointing.CheckpointSettings(every_steps=5,
                                                  every_minutes=None))


def _impala():
  return impala.Config(unroll_length=4, batch_size=2, hidden_sizes=(16,),
                       max_queue_size=8)


def _apex():
  return apex.Config(torso_sizes=(16,), head_sizes=(16,), batch_size=8,
                     min_replay_size=16, replay_size=500,
                     samples_per_insert=1.0, samples_per_insert_tolerance=20.0,
                     target_update_period=2)


def _latest_version(logdir):
  versions = [int(os.path.basename(p)[len('ckpt-'):-len('.index')])
              for p in glob.glob(os.path.join(logdir, 'checkpoints', 'latest',
                                              'ckpt-*.index'))]
  return max(versions) if versions else None


def _counts(logdir):
  with open(os.path.join(logdir, 'counts.json')) as f:
    return json.load(f)


@pytest.fixture(scope='module')
def finished_impala_run(tmp_path_factory):
  """One short IMPALA run; each test damages its own copy."""
  logdir = tmp_path_factory.mktemp('base') / 'run'
  experiment_lib.run_experiment(_impala(), _experiment(logdir))
  assert _latest_version(str(logdir)) >= 1
  return str(logdir)


@pytest.fixture
def run_copy(finished_impala_run, tmp_path):
  copy = str(tmp_path / 'run')
  shutil.copytree(finished_impala_run, copy)
  return copy


def _resume(logdir, config=None, agent='impala'):
  return experiment_lib.run_experiment(
      config or _impala(), _experiment(logdir, agent, budget=2 * BUDGET))


def _warnings(capsys):
  return [line for line in capsys.readouterr().err.splitlines()
          if line.startswith('repertory: warning: ')]


def test_deleted_checkpoints_folder_refuses_the_run(run_copy):
  shutil.rmtree(os.path.join(run_copy, 'checkpoints'))
  with pytest.raises(rundir.RunDirError) as error:
    _resume(run_copy)
  message = str(error.value)
  assert '\n' not in message
  assert 'holds counts' in message and 'no learner checkpoint' in message
  assert not os.path.exists(os.path.join(run_copy, 'attempts', '2'))


def test_deleted_counts_are_restored_from_the_attempt_record(run_copy,
                                                             capsys):
  before = _counts(run_copy)
  os.remove(os.path.join(run_copy, 'counts.json'))
  result = _resume(run_copy)
  (line,) = [w for w in _warnings(capsys) if 'counts.json' in w]
  assert 'was missing: restored from' in line
  assert f'actor_steps={int(before["actor_steps"])}' in line
  # The budget continued: the second attempt took the remaining steps only.
  assert 2 * BUDGET <= result.results['actor_steps'] <= 2 * BUDGET + 2
  with open(os.path.join(run_copy, 'attempts', '2', 'attempt.json')) as f:
    record = json.load(f)
  assert record['counts_at_start']['actor_steps'] == before['actor_steps']


def test_deleted_counts_without_a_record_refuses_the_run(run_copy):
  os.remove(os.path.join(run_copy, 'counts.json'))
  shutil.rmtree(os.path.join(run_copy, 'attempts'))
  with pytest.raises(rundir.RunDirError, match='budget would restart at 0'):
    rundir.preflight_run(_impala(), _experiment(run_copy, budget=2 * BUDGET))


def test_a_missing_index_sets_the_newest_checkpoint_aside(run_copy, capsys):
  newest = _latest_version(run_copy)
  prefix = os.path.join(run_copy, 'checkpoints', 'latest', f'ckpt-{newest}')
  os.remove(prefix + '.index')
  resuming, warnings = rundir.preflight_run(
      _impala(), _experiment(run_copy, budget=2 * BUDGET))
  assert resuming
  (line,) = warnings
  assert f'{prefix} is unreadable (its .index file is missing)' in line
  assert not glob.glob(prefix + '.*')  # Set aside, not left to hide.
  assert glob.glob(os.path.join(run_copy, 'checkpoints', 'unreadable',
                                f'ckpt-{newest}.data-*'))
  assert _latest_version(run_copy) < newest
  del capsys


def test_a_moved_run_directory_resumes(run_copy, tmp_path):
  before = _counts(run_copy)
  version = _latest_version(run_copy)
  moved = str(tmp_path / 'elsewhere' / 'run')
  shutil.move(run_copy, moved)
  result = _resume(moved)
  assert result.logdir == moved
  assert 2 * BUDGET <= result.results['actor_steps'] <= 2 * BUDGET + 2
  assert _counts(moved)['learner_steps'] > before['learner_steps']
  assert _latest_version(moved) > version  # The learner went on from there.


def _replay_server(directory: str) -> reverb.Server:
  """A Reverb server of one table that checkpoints to (and restores the
  newest checkpoint from) `directory`."""
  return reverb.Server(
      [reverb.Table('replay', reverb.selectors.Uniform(),
                    reverb.selectors.Fifo(), max_size=1_000,
                    rate_limiter=reverb.rate_limiters.MinSize(1))],
      port=portpicker.pick_unused_port(),
      checkpointer=reverb.checkpointers.DefaultCheckpointer(directory))


def _reverb_checkpoint(directory: str, items: int = 30) -> str:
  """A real Reverb checkpoint of `items` one-step items of varied sizes;
  returns its folder."""
  server = _replay_server(directory)
  try:
    client = reverb.Client(f'localhost:{server.port}')
    random = np.random.default_rng(0)
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(items):
        writer.append({'x': random.normal(size=(1 + i % 7,))[:1]})
        writer.create_item('replay', 1.0, {'x': writer.history['x'][-1:]})
        writer.flush()
    return client.checkpoint()
  finally:
    server.stop()


def _restored_items(directory: str) -> int:
  """The items a Reverb server restores from the newest checkpoint in
  `directory`."""
  server = _replay_server(directory)
  try:
    client = reverb.Client(f'localhost:{server.port}')
    return client.server_info()['replay'].current_size
  finally:
    server.stop()


def test_a_replay_checkpoint_cut_anywhere_is_set_aside(tmp_path):
  """Cut short at any byte (at a record boundary too, where the file still
  reads to its end and Reverb would abort the process), the replay
  checkpoint is set aside before any node starts."""
  source = _reverb_checkpoint(str(tmp_path / 'source'))
  with open(os.path.join(source, 'chunks.tfrecord'), 'rb') as f:
    chunks = f.read()
  logdir = str(tmp_path / 'run')
  assert not rundir.parts.replay_checkpoint(logdir)  # No replay folder.
  for cut in range(0, len(chunks), max(len(chunks) // 150, 1)):
    folder = os.path.join(logdir, 'replay', f'cut{cut}')
    shutil.copytree(source, folder)
    with open(os.path.join(folder, 'chunks.tfrecord'), 'wb') as f:
      f.write(chunks[:cut])
    warnings = rundir.parts.replay_checkpoint(logdir)
    if warnings:
      (warning,) = warnings
      assert folder in warning and 'set aside in' in warning, cut
      assert not os.path.exists(folder)
    else:  # Only the stream's trailer was cut: every item is still there.
      assert cut > len(chunks) - 8, cut
      assert _restored_items(os.path.join(logdir, 'replay')) == 30
      shutil.rmtree(folder)
  shutil.copytree(source, os.path.join(logdir, 'replay', 'whole'))
  assert not rundir.parts.replay_checkpoint(logdir)  # Whole: restored.
  assert _restored_items(os.path.join(logdir, 'replay')) == 30


def test_items_cut_at_a_record_boundary_are_set_aside(tmp_path):
  """A queue's items.tfrecord holding fewer items than its rate limiter
  counts (cut after any whole record: the file reads to its end, and
  Reverb's FIFO selector aborts the process on the first sample) is set
  aside; the whole checkpoint is restored."""
  def queue_server(directory):
    return reverb.Server(
        [reverb.Table.queue('queue', max_size=100)],
        port=portpicker.pick_unused_port(),
        checkpointer=reverb.checkpointers.DefaultCheckpointer(directory))
  server = queue_server(str(tmp_path / 'source'))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(12):
        writer.append({'x': np.float32(i)})
        writer.create_item('queue', 1.0, {'x': writer.history['x'][-1:]})
        writer.flush()
    list(client.sample('queue', num_samples=2))  # Deleted: 10 remain.
    source = client.checkpoint()
  finally:
    server.stop()
  items_path = os.path.join(source, 'items.tfrecord')
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      items_path, compression_type='ZLIB')]
  assert len(records) == 10
  logdir = str(tmp_path / 'run')
  for kept in range(len(records)):
    folder = os.path.join(logdir, 'replay', f'kept{kept}')
    shutil.copytree(source, folder)
    with tf.io.TFRecordWriter(os.path.join(folder, 'items.tfrecord'),
                              options='ZLIB') as writer:
      for record in records[:kept]:
        writer.write(record)
    (warning,) = rundir.parts.replay_checkpoint(logdir)
    assert folder in warning and f'{kept} items of table \'queue\'' in warning
    assert 'counts 10' in warning and not os.path.exists(folder)
  shutil.copytree(source, os.path.join(logdir, 'replay', 'whole'))
  assert not rundir.parts.replay_checkpoint(logdir)
  server = queue_server(os.path.join(logdir, 'replay'))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    assert client.server_info()['queue'].current_size == 10
    assert len(list(client.sample('queue', num_samples=10))) == 10
  finally:
    server.stop()


def test_a_truncated_replay_checkpoint_is_set_aside(tmp_path, capsys):
  logdir = str(tmp_path / 'run')
  experiment_lib.run_experiment(_apex(), _experiment(logdir, 'apex'))
  version = _latest_version(logdir)
  (chunks,) = glob.glob(os.path.join(logdir, 'replay', '*',
                                     'chunks.tfrecord'))
  size = os.path.getsize(chunks)
  with open(chunks, 'r+b') as f:
    f.truncate(size // 2)
  capsys.readouterr()
  result = _resume(logdir, _apex(), 'apex')
  (line,) = [w for w in _warnings(capsys) if 'replay checkpoint' in w]
  assert os.path.dirname(chunks) in line and 'set aside in' in line
  assert os.path.isdir(os.path.join(logdir, 'replay-unreadable',
                                    os.path.basename(os.path.dirname(chunks))))
  assert 2 * BUDGET <= result.results['actor_steps'] <= 2 * BUDGET + 2
  assert _latest_version(logdir) > version  # The learner went on.
