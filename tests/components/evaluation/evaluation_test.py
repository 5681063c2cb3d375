"""Episode bookkeeping, evaluation episodes and the run monitor."""

import csv
import functools
import json
import os
import time

import dm_env
import numpy as np
import pytest

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components import actors
from repertory.components import counting
from repertory.components import evaluation
from repertory.components.evaluation import points

F, M, L = 0, 1, 2


def test_episode_tracker_sums_rewards_per_environment():
  tracker = evaluation.EpisodeTracker(2)
  # (step types, rewards) of two environments; FIRST rewards are ignored.
  stream = [([F, F], [9, 9]), ([M, M], [1, 2]), ([L, M], [1, 2]),
            ([F, L], [9, 2]), ([M, F], [5, 9])]
  for step_type, reward in stream:
    tracker.observe(np.array(step_type), np.array(reward, np.float32))
  returns, lengths = tracker.pop()
  assert returns == [2.0, 6.0] and lengths == [2, 3]
  assert tracker.pop() == ([], [])


@pytest.mark.parametrize('dtype', [np.int8, np.int64])
def test_episode_tracker_matches_a_plain_loop_over_random_episodes(dtype):
  """Batched, auto-resetting streams (FIRST after every LAST, long runs of
  MID everywhere) against per-environment sums written out by hand."""
  rng = np.random.default_rng(0)
  num_envs, num_steps = 5, 400
  step_types = np.empty((num_steps, num_envs), dtype)
  rewards = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
  for i in range(num_envs):
    step_types[0, i] = F
    for t in range(1, num_steps):
      if step_types[t - 1, i] == L:
        step_types[t, i] = F
      else:  # Episodes of 1 to ~40 steps.
        step_types[t, i] = L if rng.random() < 0.03 + 0.2 * (i == 0) else M
  expected = []
  for i in range(num_envs):
    total, length = 0.0, 0
    for t in range(num_steps):
      if step_types[t, i] == F:
        total, length = 0.0, 0
        continue
      total += float(rewards[t, i])
      length += 1
      if step_types[t, i] == L:
        expected.append((t, i, total, length))
  expected.sort()

  tracker = evaluation.EpisodeTracker(num_envs)
  returns, lengths = [], []
  for t in range(num_steps):
    tracker.observe(step_types[t], rewards[t])
    if t % 7 == 0:
      popped = tracker.pop()
      returns += popped[0]
      lengths += popped[1]
  popped = tracker.pop()
  returns += popped[0]
  lengths += popped[1]
  assert lengths == [e[3] for e in expected]
  np.testing.assert_allclose(returns, [e[2] for e in expected], rtol=1e-6)
  assert (step_types == M).all(axis=1).sum() > num_steps // 4  # All MID.


class FixedActor(core.Actor):
  """Always takes the same action (a real, if simple, policy)."""

  def __init__(self, action, variable_source=None):
    self.action = action
    self.updated = False
    del variable_source

  def select_action(self, observation):
    return np.int32(self.action)

  def observe_first(self, timestep):
    pass

  def observe(self, action, next_timestep):
    pass

  def update(self, wait=False):
    self.updated = True


def test_evaluate_plays_whole_episodes():
  env = environments.make('catch', seed=0)
  result = evaluation.evaluate(env, FixedActor(1), num_episodes=5)
  assert len(result.returns) == 5
  assert all(r in (-1.0, 1.0) for r in result.returns)
  assert result.lengths == [9] * 5
  summary = result.as_dict()
  assert summary['eval_episodes'] == 5
  with pytest.raises(ValueError, match='num_episodes must be >= 1'):
    evaluation.evaluate(env, FixedActor(1), num_episodes=0)


def _monitor(tmp_path, counter, **kwargs):
  values = dict(counter=counter,
                make_environment=functools.partial(environments.make, 'catch',
                                                   seed=3),
                make_eval_actor=functools.partial(FixedActor, 1),
                variable_source=None, logdir=str(tmp_path),
                max_actor_steps=100, eval_episodes=3, eval_fraction=None,
                metadata={'agent': 'test'}, progress_every_seconds=0.05)
  values.update(kwargs)
  return evaluation.RunMonitor(**values)


def test_monitor_summary_and_results(tmp_path):
  counter = counting.Counter()
  monitor = _monitor(tmp_path, counter)
  counter.increment(actor_steps=50, learner_steps=3, policy_lag_sum=6.0,
                    policy_lag_items=4)
  monitor.record_episodes(returns=[1.0, -1.0, 1.0], lengths=[9, 9, 9])
  summary = monitor.summary()
  assert summary['actor_steps'] == 50
  assert summary['episodes'] == 3
  assert summary['episode_return_mean'] == pytest.approx(1 / 3)
  assert summary['policy_lag_mean'] == pytest.approx(1.5)
  results = monitor.finish()
  with open(os.path.join(tmp_path, 'results.json')) as f:
    written = json.load(f)
  assert written == json.loads(json.dumps(results))
  assert written['agent'] == 'test' and written['eval_episodes'] == 3


def test_monitor_stops_the_program_at_its_budget(tmp_path):
  program = launch.Program('monitor_test')
  with program.group('counter'):
    counter = program.add_node(launch.CourierNode(counting.Counter))
  with program.group('monitor'):
    program.add_node(launch.CourierNode(
        evaluation.RunMonitor, counter=counter,
        make_environment=functools.partial(environments.make, 'catch', seed=3),
        make_eval_actor=functools.partial(FixedActor, 1),
        variable_source=None, logdir=str(tmp_path), max_actor_steps=100,
        eval_episodes=2, progress_every_seconds=0.05))
  with program.group('actor'):
    program.add_node(launch.PyNode(_count_steps, counter))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=300)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    results = json.load(f)
  assert results['actor_steps'] >= 100
  with open(os.path.join(tmp_path, 'progress.log')) as f:
    assert 'actor_steps=' in f.read()


def _count_steps(counter):
  stop = launch.stop_event()
  while not stop.wait(0.01):
    counter.increment(actor_steps=10)


def test_monitor_stops_early_at_the_return_threshold(tmp_path):
  counter = counting.Counter()
  monitor = _monitor(tmp_path, counter, max_actor_steps=10**9,
                     stop_at_return=0.9)
  monitor.record_episodes(returns=[1.0] * 99)
  assert not monitor._done()  # pylint: disable=protected-access
  monitor.record_episodes(returns=[1.0])
  assert monitor._done()  # pylint: disable=protected-access
  assert isinstance(dm_env.StepType.FIRST, dm_env.StepType)


def _wait_for_count(counter, key, value, timeout=30.0):
  deadline = time.monotonic() + timeout
  while counter.get_counts().get(key, 0) != value:
    assert time.monotonic() < deadline, counter.get_counts()
    time.sleep(0.01)


def test_actor_reporter_sends_at_most_once_per_interval_then_flushes():
  program = launch.Program('reporter_test')
  with program.group('counter'):
    program.add_node(launch.CourierNode(counting.Counter))
  launched = launch.launch(program, launch_type='test_mt', block=False,
                           termination_notice_secs=5)
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    reporter = evaluation.ActorReporter(counter, None, min_interval_s=3600)
    reporter.report(10, [], [])             # The first report is sent.
    _wait_for_count(counter, 'actor_steps', 10)
    for _ in range(4):
      reporter.report(10, [1.0], [9])       # Held back: interval not over.
    time.sleep(0.2)
    assert counter.get_counts()['actor_steps'] == 10
    reporter.flush()
    _wait_for_count(counter, 'actor_steps', 50)
  finally:
    launched.stop(timeout=60)
  with pytest.raises(ValueError, match='min_interval_s'):
    evaluation.ActorReporter(None, None, min_interval_s=-1)


def _budgeted_actor(counter, monitor, batch):
  reporter = evaluation.ActorReporter(counter, monitor)
  stop = launch.stop_event()
  while not stop.is_set() and reporter.acquire(batch):
    reporter.report(batch, [1.0], [batch])
  reporter.flush()


def _monitor_node(tmp_path, counter, **kwargs):
  values = dict(counter=counter,
                make_environment=functools.partial(environments.make, 'catch',
                                                   seed=3),
                make_eval_actor=functools.partial(FixedActor, 1),
                variable_source=None, logdir=str(tmp_path), eval_episodes=2,
                progress_every_seconds=3600)
  values.update(kwargs)
  return launch.CourierNode(evaluation.RunMonitor, **values)


def _run_budget(tmp_path, actor, *actor_args, num_actors=1,
                make_evaluator=None, eval_every_steps=0):
  """Runs `num_actors` actors `actor(counter, monitor, *actor_args)` (and
  the node `make_evaluator(counter, monitor)`, if given) against a monitor
  with a budget of 1,000 steps (test_mt); returns results.json."""
  program = launch.Program('budget_test')
  with program.group('counter'):
    counter = program.add_node(launch.CourierNode(counting.Counter))
  with program.group('monitor'):
    monitor = program.add_node(_monitor_node(
        tmp_path, counter, max_actor_steps=1_000,
        eval_every_steps=eval_every_steps))
  if make_evaluator is not None:
    with program.group('evaluator'):
      program.add_node(make_evaluator(counter, monitor))
  with program.group('actor'):
    for _ in range(num_actors):
      program.add_node(launch.PyNode(actor, counter, monitor, *actor_args))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=120)
  with open(os.path.join(tmp_path, 'results.json')) as f:
    return json.load(f)


def test_actors_stop_within_one_batched_step_of_the_budget(tmp_path):
  """Three actors of 7-step batches against a budget of 1,000: the monitor
  ends the run (without waiting for a progress tick) at 1,000 to 1,018."""
  results = _run_budget(tmp_path, _budgeted_actor, 7, num_actors=3)
  assert 1_000 <= results['actor_steps'] <= 1_000 + 3 * 6


class FixedBatchPolicy:
  """A `core.Policy` that always takes the same action."""

  def __init__(self, action):
    self._action = action

  def initial_state(self, batch_size):
    del batch_size
    return ()

  def step(self, observation, state, first):
    del first
    return np.full(len(observation), self._action, np.int32), {}, state

  def set_weights(self, weights):
    del weights


def _batched_actor(counter, monitor, num_envs, report_every):
  actors.BatchedActor(
      environments.make_batched('catch', num_envs, seed=0),
      FixedBatchPolicy(1), counter=counter, monitor=monitor,
      report_every=report_every).run()


def test_episodes_are_counted_with_the_steps_that_finished_them(tmp_path):
  """A budgeted actor that reports every 12 batched steps: the episodes
  that end after its last report (batched catch ends an episode every 10th
  step, 9 moves and the reset: the last at step 499 of its 500, after the
  report at 492) still reach results.json and episodes.csv."""
  results = _run_budget(tmp_path, _batched_actor, 2, 12)
  with open(os.path.join(tmp_path, 'episodes.csv')) as f:
    rows = list(csv.DictReader(f))
  assert results['actor_steps'] == 1_000
  assert results['episodes'] == 2 * (500 // 10) == len(rows)


def _count_slowly(counter):
  stop = launch.stop_event()
  while not stop.wait(0.02):
    counter.increment(actor_steps=50)


@pytest.mark.parametrize('stop_evaluations', [1, 2])
def test_evaluator_reports_on_its_cadence_and_the_monitor_judges_it(
    tmp_path, stop_evaluations):
  program = launch.Program('evaluator_test')
  with program.group('counter'):
    counter = program.add_node(launch.CourierNode(counting.Counter))
  with program.group('monitor'):
    monitor = program.add_node(_monitor_node(
        tmp_path, counter, max_actor_steps=10**9, stop_at_return=-1.0,
        judge_evaluation=True, stop_evaluations=stop_evaluations))
  with program.group('evaluator'):
    program.add_node(launch.CourierNode(
        evaluation.PeriodicEvaluator, counter, monitor,
        functools.partial(environments.make, 'catch', seed=5),
        functools.partial(FixedActor, 1), None, num_episodes=3,
        every_steps=500))
  with program.group('actor'):
    program.add_node(launch.PyNode(_count_slowly, counter))
  launched = launch.launch(program, launch_type='test_mt',
                           termination_notice_secs=5)
  assert launched.wait(timeout=120)  # Stopped by the stop_evaluations-th.
  with open(os.path.join(tmp_path, 'progress.csv')) as f:
    rows = [r for r in csv.DictReader(f) if r.get('eval_return_mean')]
  periodic, final = rows[:-1], rows[-1]
  assert len(periodic) == stop_evaluations
  assert int(periodic[0]['actor_steps']) >= 500
  assert int(periodic[0]['eval_episodes']) == 3
  assert int(final['eval_episodes']) == 2
  with open(os.path.join(tmp_path, 'results.json')) as f:
    assert json.load(f)['eval_episodes'] == 2


class SlowActor(FixedActor):
  """A FixedActor that takes 10 ms a step."""

  def select_action(self, observation):
    time.sleep(0.01)
    return super().select_action(observation)


class LateEvaluator(evaluation.PeriodicEvaluator):
  """A PeriodicEvaluator whose node starts half a second late."""

  def run(self):
    time.sleep(0.5)
    super().run()


def test_a_slow_evaluation_holds_the_actors_at_the_next_point(tmp_path):
  """Evaluations every 100 steps that take longer than the actors need
  for 100 steps: the actors wait at the next point while one runs, so
  each evaluates at its point (within one batch of 7); the first too,
  although the evaluator starts after the actors."""
  _run_budget(tmp_path, _budgeted_actor, 7, eval_every_steps=100,
              make_evaluator=lambda c, m: launch.CourierNode(
                  LateEvaluator, c, m,
                  functools.partial(environments.make, 'catch', seed=5),
                  functools.partial(SlowActor, 1), None, num_episodes=2,
                  every_steps=100, eval_fraction=None))
  with open(os.path.join(tmp_path, 'progress.csv')) as f:
    rows = [r for r in csv.DictReader(f) if r.get('eval_return_mean')]
  points = [int(r['actor_steps']) for r in rows[:-1]]  # The last: final.
  assert len(points) >= 5, points
  assert all(p % 100 < 7 for p in points), points


def test_evaluator_needs_a_cadence():
  with pytest.raises(ValueError, match='every_steps and/or every_seconds'):
    evaluation.PeriodicEvaluator(None, None, None, None, None)


def test_a_finishing_run_answers_the_evaluator_after_its_poll(tmp_path):
  """Once the run finishes, asking for an evaluation point waits out the
  caller's poll before answering None, so the evaluator does not spin
  (and take the CPU from the final evaluation) while polling."""
  monitor = evaluation.RunMonitor(
      counter=counting.Counter(), make_environment=None,
      make_eval_actor=None, variable_source=None, logdir=str(tmp_path),
      max_actor_steps=1_000, progress_every_seconds=3600)
  monitor._finishing.set()  # pylint: disable=protected-access
  start = time.monotonic()
  assert monitor.wait_for_evaluation_point(100, timeout_s=0.3) is None
  assert time.monotonic() - start >= 0.3


def test_the_monitor_stops_on_evaluations_in_a_row_only(tmp_path):
  """stop_evaluations=2: a pass, a miss, then two passes; only the last
  evaluation completes two in a row."""
  monitor = evaluation.RunMonitor(
      counter=counting.Counter(), make_environment=None,
      make_eval_actor=None, variable_source=None, logdir=str(tmp_path),
      max_actor_steps=10**9, stop_at_return=0.9, judge_evaluation=True,
      stop_evaluations=2, progress_every_seconds=3600)
  reached = []
  for i, value in enumerate([1.0, 0.5, 1.0, 1.0]):
    monitor.record_evaluation(1000 * (i + 1), i, {'eval_return_mean': value,
                                                  'eval_episodes': 20})
    reached.append(monitor._return_reached())  # pylint: disable=protected-access
  assert reached == [False, False, False, True]
  with pytest.raises(ValueError, match='stop_evaluations and stop_episodes '
                     'must be >= 1, got 0 and 1'):
    evaluation.RunMonitor(
        counter=counting.Counter(), make_environment=None,
        make_eval_actor=None, variable_source=None, logdir=str(tmp_path),
        max_actor_steps=10, stop_evaluations=0)


def test_evaluations_cut_short_are_judged_in_longer_runs(tmp_path):
  """stop_evaluations=2, stop_episodes=20: evaluations of 4 episodes stop
  the run only after five in a row (20 episodes) reach the target; a
  miss among them starts the count again."""
  monitor = evaluation.RunMonitor(
      counter=counting.Counter(), make_environment=None,
      make_eval_actor=None, variable_source=None, logdir=str(tmp_path),
      max_actor_steps=10**9, stop_at_return=475.0, judge_evaluation=True,
      stop_evaluations=2, stop_episodes=20, progress_every_seconds=3600)
  reached = []
  for i, value in enumerate([500, 500, 400, 500, 500, 500, 500, 500]):
    monitor.record_evaluation(1000 * (i + 1), i, {'eval_return_mean': value,
                                                  'eval_episodes': 4})
    reached.append(monitor._return_reached())  # pylint: disable=protected-access
  assert reached == [False] * 7 + [True]
  # Two full evaluations are enough, as before.
  monitor.record_evaluation(9000, 8, {'eval_return_mean': 400.0,
                                      'eval_episodes': 20})
  for i in range(2):
    monitor.record_evaluation(10000 + i, 9 + i, {'eval_return_mean': 480.0,
                                                 'eval_episodes': 20})
  assert monitor._return_reached()  # pylint: disable=protected-access


def test_point_holds_start_at_the_first_point_and_drop_only_when_waited_at(
    monkeypatch):
  """A run resumed at 250 with points every 100: held at 300 from the start;
  a hold past its lease is dropped only once the actors stand at it."""
  monkeypatch.setattr(points, 'FIRST_HOLD_SECONDS', 0.0)
  budget = counting.StepsBudget(1_000, 250)
  holds = points.PointHolds(budget, 250, every_steps=100)
  assert budget.lease('actor', 0, 500, first=True) == (50, 50)
  holds.drop_if_stale()  # Lapsed, but the actors have not reached 300.
  assert budget.lease('actor', 0, 500) == (0, 50)
  budget.lease('actor', 50, 0)  # Now they stand at 300.
  holds.drop_if_stale()
  assert budget.lease('actor', 0, 500) == (500, 500)
  holds.hold(900)
  assert budget.lease('actor', 500, 500) == (100, 100)
  # No point past the budget: a run resumed at 950 is not held.
  budget = counting.StepsBudget(1_000, 950)
  points.PointHolds(budget, 950, every_steps=100)
  assert budget.lease('actor', 0, 500, first=True) == (50, 50)
