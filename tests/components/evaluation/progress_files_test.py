"""The run monitor in a program: it stops the run once the budget is spent
and leaves results.json and progress.csv (what `repertory.plot` reads)."""

import csv
import json
import os
import sys

import cloudpickle
import numpy as np

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components import counting
from repertory.components.evaluation import monitor as monitor_lib

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class _FirstActionActor(core.Actor):
  """Always action 0; counts its weight updates."""

  def __init__(self, variable_source):
    self.updates = 0

  def select_action(self, observation):
    return np.int32(0)

  def observe_first(self, timestep):
    pass

  def observe(self, action, next_timestep):
    pass

  def update(self, wait=False):
    self.updates += 1


def _worker(counter, monitor):
  for _ in range(3):
    counter.increment(actor_steps=40)
    monitor.record_episodes(returns=[1.0, -1.0])
    launch.stop_event().wait(0.05)


def test_monitor_stops_the_program_and_writes_its_files(tmp_path):
  program = launch.Program('monitor_test')
  counter = program.add_node(launch.CourierNode(counting.Counter))
  monitor = program.add_node(launch.CourierNode(
      monitor_lib.RunMonitor, counter=counter,
      make_environment=lambda: environments.make('catch', seed=0),
      make_eval_actor=_FirstActionActor, variable_source=None,
      logdir=str(tmp_path), max_actor_steps=100, eval_episodes=3, eval_fraction=None,
      metadata={'agent': 'none'}, progress_every_seconds=0.1))
  program.add_node(launch.PyNode(_worker, counter, monitor))
  launch.launch(program, launch_type='local_mt')

  with open(tmp_path / 'results.json') as f:
    results = json.load(f)
  assert results['agent'] == 'none'
  assert results['actor_steps'] >= 100
  assert results['eval_episodes'] == 3
  assert results['episode_return_mean'] == 0.0
  with open(tmp_path / 'progress.csv') as f:
    rows = list(csv.DictReader(f))
  assert rows and {'actor_steps', 'wall_seconds',
                   'episode_return_mean'} <= set(rows[0])
  assert os.listdir(tmp_path / 'tensorboard' / 'monitor')


def test_monitor_writes_one_timed_row_per_episode(tmp_path):
  counter = counting.Counter()
  monitor = monitor_lib.RunMonitor(
      counter=counter, make_environment=lambda: None,
      make_eval_actor=_FirstActionActor, variable_source=None,
      logdir=str(tmp_path), max_actor_steps=100)
  monitor.record_episodes(returns=[9.0, 12.5], lengths=[9, 13])
  monitor.record_episodes(returns=[3.0])  # No lengths: written as 0.
  with open(tmp_path / 'episodes.csv') as f:
    rows = list(csv.DictReader(f))
  assert [(float(r['return']), int(r['length'])) for r in rows] == [
      (9.0, 9), (12.5, 13), (3.0, 0)]
  times = [float(r['time']) for r in rows]
  assert times == sorted(times) and times[0] > 1e9  # Wall-clock seconds.
  # A resumed run appends under the same header.
  again = monitor_lib.RunMonitor(
      counter=counter, make_environment=lambda: None,
      make_eval_actor=_FirstActionActor, variable_source=None,
      logdir=str(tmp_path), max_actor_steps=100)
  again.record_episodes(returns=[7.0], lengths=[7])
  with open(tmp_path / 'episodes.csv') as f:
    text = f.read()
  assert text.count('time,return,length') == 1 and text.endswith(',7,7\n')


def test_once_done_actors_get_no_steps_and_late_evaluations_no_row(tmp_path):
  """A run that ends on its return (not its budget): the steps in
  results.json are all the actors took, and the last evaluation row is the
  final one."""
  counter = counting.Counter()
  monitor = monitor_lib.RunMonitor(
      counter=counter, make_environment=lambda: environments.make('catch'),
      make_eval_actor=_FirstActionActor, variable_source=None,
      logdir=str(tmp_path), max_actor_steps=10_000, eval_episodes=1)
  assert monitor.acquire_steps('actor/0', 0, 100, first=True) == 100
  assert monitor.acquire_steps('actor/0', 100, 100) == 100
  evaluation = {'eval_return_mean': 1.0, 'eval_episodes': 1}
  monitor.record_evaluation(100, 1, evaluation)
  results = monitor.finish()  # E.g. that evaluation solved it.
  assert results['actor_steps'] == 100
  # An actor asking again after the end: none granted.
  assert monitor.acquire_steps('actor/0', 0, 100) == 0
  monitor.record_evaluation(150, 2, evaluation)  # Ran past the end.
  with open(tmp_path / 'progress.csv') as f:
    rows = [r for r in csv.DictReader(f) if r['eval_return_mean']]
  assert [int(r['actor_steps']) for r in rows] == [100, 100]
  assert float(rows[-1]['eval_return_mean']) == results['eval_return_mean']


def test_the_budget_spent_means_the_steps_are_counted(tmp_path):
  """The monitor's loop finishes as soon as the budget shows its last steps
  used, so by then the counter must hold them (results.json reads the
  counter)."""
  seen_by_counter = []

  class _Counter(counting.Counter):

    def increment(self, **counts):
      # What the monitor's loop would see at this moment.
      seen_by_counter.append(monitor._done())  # pylint: disable=protected-access
      return super().increment(**counts)

  monitor = monitor_lib.RunMonitor(
      counter=_Counter(), make_environment=lambda: environments.make('catch'),
      make_eval_actor=_FirstActionActor, variable_source=None,
      logdir=str(tmp_path), max_actor_steps=200, eval_episodes=1)
  assert monitor.acquire_steps('actor/0', 0, 100, first=True) == 100
  assert monitor.acquire_steps('actor/0', 100, 100) == 100
  assert monitor.acquire_steps('actor/0', 100, 0) == 0
  # Not done at any increment: done only after the last one is counted.
  assert seen_by_counter == [False, False]
  assert monitor._done()  # pylint: disable=protected-access
  assert monitor.finish()['actor_steps'] == 200


class _Figures:
  """A metrics source (what a league node is to the monitor): figures that
  change when it says, and its own final ones."""

  def __init__(self):
    self.value, self.calls = 0.5, []

  def evaluation_metrics(self, final=False):
    self.calls.append(final)
    return {'exploitability': -1.0 if final else self.value}


def test_a_metrics_source_gives_rows_as_they_change_and_final_figures(
    tmp_path):
  counter = counting.Counter()
  source = _Figures()
  monitor = monitor_lib.RunMonitor(
      counter=counter, make_environment=lambda: environments.make('catch'),
      make_eval_actor=_FirstActionActor, variable_source=None,
      logdir=str(tmp_path), max_actor_steps=10_000, eval_episodes=1,
      metrics_source=source)
  monitor.acquire_steps('actor/0', 0, 100, first=True)
  monitor._progress_row()  # pylint: disable=protected-access
  monitor._progress_row()  # pylint: disable=protected-access  (no new row)
  source.value = 0.25
  monitor.acquire_steps('actor/0', 100, 100)
  monitor._progress_row()  # pylint: disable=protected-access
  results = monitor.finish()
  assert results['exploitability'] == -1.0 and source.calls[-1] is True
  with open(tmp_path / 'progress.csv') as f:
    rows = [r for r in csv.DictReader(f) if r['exploitability']]
  assert [(int(r['actor_steps']), float(r['exploitability']))
          for r in rows] == [(0, 0.5), (100, 0.25), (100, -1.0)]
  with open(tmp_path / 'progress.log') as f:
    lines = [l for l in f if 'exploitability=' in l]
  assert len(lines) == 3 and 'final metrics' in lines[-1]
