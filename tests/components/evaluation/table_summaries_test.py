"""The run monitor's table summaries (size, samples per insert) from a real
Reverb server, in results.json, progress.csv and TensorBoard."""

import csv
import functools
import glob
import json
import os

import numpy as np
import reverb

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components import counting
from repertory.components import evaluation


class _FirstAction(core.Actor):
  """Always action 0 (the monitor's evaluation actor)."""

  def __init__(self, variable_source):
    del variable_source

  def select_action(self, observation):
    return np.int32(0)

  def observe_first(self, timestep):
    pass

  def observe(self, action, next_timestep):
    pass

  def update(self, wait=False):
    pass


def _make_tables():
  return [reverb.Table.queue('queue', 100),
          reverb.Table('replay', sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=100,
                       rate_limiter=reverb.rate_limiters.MinSize(1))]


def _insert_and_sample(client, counter):
  """4 items into each table; 2 samples from the queue, 6 from replay."""
  for i in range(4):
    client.insert([np.float32(i)], priorities={'queue': 1.0})
    client.insert([np.float32(i)], priorities={'replay': 1.0})
  assert len(list(client.sample('queue', num_samples=2))) == 2
  assert len(list(client.sample('replay', num_samples=6))) == 6
  launch.stop_event().wait(0.5)  # A few progress periods see the tables.
  counter.increment(actor_steps=100)  # The budget: the monitor finishes.


def test_tables_sizes_and_samples_per_insert(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  program = launch.Program('tables')
  replay = program.add_node(launch.ReverbNode(_make_tables), label='replay')
  counter = program.add_node(launch.CourierNode(counting.Counter),
                             label='counter')
  program.add_node(launch.CourierNode(
      evaluation.RunMonitor, counter=counter,
      make_environment=functools.partial(environments.make, 'catch', seed=0),
      make_eval_actor=_FirstAction, variable_source=None,
      logdir=str(tmp_path), max_actor_steps=100, eval_episodes=1,
      replay=replay, progress_every_seconds=0.05), label='monitor')
  program.add_node(launch.PyNode(_insert_and_sample, replay, counter),
                   label='worker')
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=120)

  with open(tmp_path / 'results.json') as f:
    results = json.load(f)
  assert results['tables/queue/size'] == 2  # 4 in, 2 sampled (removed).
  assert results['tables/queue/samples_per_insert'] == 0.5
  assert results['tables/replay/size'] == 4
  assert results['tables/replay/samples_per_insert'] == 1.5
  with open(tmp_path / 'progress.csv') as f:
    # The last progress row (the final evaluation's row follows it).
    last = [r for r in csv.DictReader(f) if not r['eval_return_mean']][-1]
  assert float(last['tables/replay/samples_per_insert']) == 1.5
  with open(tmp_path / 'progress.log') as f:
    assert 'queue=2 replay=4' in f.read()  # The live progress line.
  written = [value.simple_value
             for path in glob.glob(os.path.join(tmp_path, 'tensorboard',
                                                'monitor', '*'))
             for event in tf.compat.v1.train.summary_iterator(path)
             for value in event.summary.value
             if value.tag == 'monitor/tables/replay/samples_per_insert']
  assert written and written[-1] == 1.5
