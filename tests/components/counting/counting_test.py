"""Counter hierarchy and StepsLimiter (under a real test_mt launch)."""

import threading

import pytest

from repertory import launch
from repertory.components.counting import Counter
from repertory.components.counting import StepsLimiter


def test_children_push_prefixed_counts_to_parent():
  root = Counter()
  actor_a = Counter(root, 'actor', time_delta=0.0)
  actor_b = Counter(root, 'actor', time_delta=0.0)
  learner = Counter(root, 'learner', time_delta=0.0)
  actor_a.increment(steps=5, episodes=1)
  actor_b.increment(steps=3)
  counts = learner.increment(steps=1)
  assert root.get_counts() == {'actor_steps': 8, 'actor_episodes': 1,
                               'learner_steps': 1}
  assert counts['actor_steps'] == 8  # the learner sees the actors' totals.
  assert actor_a.get_counts()['actor_steps'] == 5  # last synced at 5.


def test_time_delta_batches_pushes():
  root = Counter()
  child = Counter(root, 'actor', time_delta=3600.0)
  child.increment(steps=1)  # the first increment syncs.
  child.increment(steps=1)
  assert root.get_counts() == {'actor_steps': 1}
  assert child.get_counts()['actor_steps'] == 2  # parent's 1 + unsent 1.
  child.flush()
  assert root.get_counts() == {'actor_steps': 2}


def test_return_only_prefixed_and_restore():
  root = Counter()
  child = Counter(root, 'actor', time_delta=0.0, return_only_prefixed=True)
  Counter(root, 'learner', time_delta=0.0).increment(steps=7)
  assert child.increment(steps=2) == {'steps': 2}
  state = child.save()
  fresh = Counter()
  fresh.restore(state)
  assert fresh.get_counts() == {'steps': 2}


def test_concurrent_increments_are_not_lost():
  root = Counter()

  def work():
    child = Counter(root, 'actor', time_delta=0.0)
    for _ in range(500):
      child.increment(steps=1)

  threads = [threading.Thread(target=work) for _ in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert root.get_counts()['actor_steps'] == 2000


class _HeldCounter(Counter):
  """A real root Counter whose first increment waits for `release`."""

  def __init__(self):
    super().__init__()
    self.entered, self.release = threading.Event(), threading.Event()

  def increment(self, **counts):
    if not self.entered.is_set():
      self.entered.set()
      assert self.release.wait(30.0)
    return super().increment(**counts)


def test_flush_waits_for_a_push_in_flight():
  # A step's push is on its way when the stop handler flushes: the flush
  # must not return before those counts arrived (the learners' count race).
  root = _HeldCounter()
  child = Counter(root, time_delta=0.0)
  step = threading.Thread(target=child.increment, kwargs={'learner_steps': 1})
  step.start()
  assert root.entered.wait(30.0)
  seen = {}

  def flush():
    child.flush()
    seen.update(root.get_counts())

  flusher = threading.Thread(target=flush)
  flusher.start()
  root.release.set()
  flusher.join(30.0)
  step.join(30.0)
  assert seen == {'learner_steps': 1}


def test_bad_parent_is_explained():
  with pytest.raises(TypeError, match='increment'):
    Counter(parent=object())


class _Stepper:
  """Counts actor steps until the program stops."""

  def __init__(self, counter):
    self._counter = Counter(counter, 'actor', time_delta=0.0)

  def run(self):
    stop = launch.stop_event()
    while not stop.is_set():
      self._counter.increment(steps=10)
      stop.wait(0.001)


def test_steps_limiter_stops_the_program():
  program = launch.Program('limiter')
  counter = program.add_node(launch.CourierNode(Counter))
  program.add_node(launch.CourierNode(_Stepper, counter))
  program.add_node(launch.CourierNode(StepsLimiter, counter, 200,
                                      poll_interval_s=0.01))
  launched = launch.launch(program, launch_type='test_mt')
  try:
    assert launched.wait(timeout=60), 'StepsLimiter did not stop the program'
  finally:
    launched.stop(timeout=10)
