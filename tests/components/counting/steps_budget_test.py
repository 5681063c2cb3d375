"""StepsBudget: many actors taking batched steps never exceed the budget by
more than one batched step each, and together they spend all of it."""

import random
import threading
import time

import pytest

from repertory.components.counting import StepsBudget


def _actor(budget, name, batch, wanted, taken):
  """An actor loop as `ActorReporter.acquire` runs it: ask when the local
  allowance cannot cover a batched step, take the step if anything is left."""
  allowance, used, first = 0, 0, True
  while True:
    if allowance < batch:
      allowance += budget.acquire(name, used, wanted, first)
      used, first = 0, False
      if allowance <= 0:
        return
    allowance = max(allowance - batch, 0)
    used += batch
    taken[name] = taken.get(name, 0) + batch
    if random.random() < 0.01:
      time.sleep(0.001)


@pytest.mark.parametrize('limit,batch,wanted,num_actors',
                         [(10_000, 8, 64, 4), (10_003, 7, 50, 5),
                          (100, 16, 1000, 3), (5, 8, 8, 2)])
def test_threads_spend_the_budget_exactly(limit, batch, wanted, num_actors):
  budget = StepsBudget(limit)
  taken = {}
  threads = [threading.Thread(target=_actor,
                              args=(budget, f'a{i}', batch, wanted, taken))
             for i in range(num_actors)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join(timeout=60)
  total = sum(taken.values())
  assert limit <= total <= limit + num_actors * (batch - 1), taken
  assert budget.counted == total
  assert budget.exhausted()
  assert budget.acquire('late', 0, 10, first=True) == 0


def test_grants_never_exceed_what_is_left():
  budget = StepsBudget(100, counted=60)   # A resumed run at 60 of 100.
  assert budget.acquire('a', 0, 30) == 30
  assert budget.acquire('b', 0, 30) == 10   # 60 counted + 30 reserved.
  assert budget.acquire('b', 0, 30) == 0
  assert budget.acquire('a', 30, 0) == 0    # a used its 30: counted 90.
  assert budget.counted == 90 and not budget.exhausted()
  assert budget.acquire('b', 10, 0) == 0
  assert budget.exhausted()


def test_a_restarted_holder_drops_its_old_reservation():
  budget = StepsBudget(100)
  assert budget.acquire('actor-0', 0, 100) == 100
  assert budget.acquire('actor-1', 0, 10) == 0
  assert budget.acquire('actor-0', 0, 40, first=True) == 40  # Restarted.
  assert budget.acquire('actor-1', 0, 100) == 60


def test_a_silent_holder_loses_its_reservation():
  budget = StepsBudget(100, lease_seconds=0.05)
  assert budget.acquire('crashed', 0, 100) == 100
  assert budget.acquire('alive', 0, 10) == 0
  time.sleep(0.1)
  assert budget.acquire('alive', 0, 10) == 10


def test_bad_arguments():
  with pytest.raises(ValueError, match='limit must be >= 0'):
    StepsBudget(-1)
  with pytest.raises(ValueError, match='used and wanted'):
    StepsBudget(10).acquire('a', -1, 0)


def test_a_holder_back_after_its_lease_is_told_what_it_holds():
  budget = StepsBudget(100, lease_seconds=0.05)
  assert budget.lease('frozen', 0, 60) == (60, 60)
  time.sleep(0.1)
  assert budget.lease('alive', 0, 100) == (100, 100)  # The 60 came back.
  assert budget.returned == 60
  # The frozen holder reports 20 used: counted, and it holds nothing now.
  assert budget.lease('frozen', 20, 10) == (0, 0)
  assert budget.counted == 20


def test_a_hold_stops_grants_at_its_step_until_released():
  budget = StepsBudget(1_000)
  budget.hold_at(100)
  assert budget.acquire('a', 0, 64) == 64
  assert budget.acquire('b', 0, 64) == 36      # Up to the hold only.
  assert budget.acquire('a', 64, 64) == 0
  assert not budget.wait_for(100, timeout=0.05)
  assert budget.acquire('b', 36, 0) == 0
  assert budget.wait_for(100, timeout=0.05) and budget.counted == 100
  released = threading.Timer(0.1, budget.release)
  released.start()
  assert budget.wait_for_release(timeout=10)
  assert budget.acquire('a', 0, 64) == 64
  assert not budget.wait_for_release(timeout=10)  # No hold: at once.


def test_settled_once_every_reservation_is_reported():
  budget = StepsBudget(100, lease_seconds=0.2)
  budget.acquire('a', 0, 30)
  budget.acquire('dead', 0, 30)
  assert budget.outstanding() == 60
  assert not budget.wait_settled(timeout=0.05)
  budget.acquire('a', 30, 0)
  assert budget.wait_settled(timeout=5)  # 'dead' expired meanwhile.
  assert budget.counted == 30 and budget.returned == 30
