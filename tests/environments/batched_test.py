"""Tests for batched environments: auto-reset, seeding, process workers."""

import gc
import os
import subprocess
import sys
import time

import dm_env
import numpy as np
import psutil
import pytest

from repertory import environments
from repertory.environments import batched


def _random_actions(batch, steps, seed=0):
  rng = np.random.RandomState(seed)
  spec = batch.action_spec()
  return rng.randint(spec.num_values, size=(steps, batch.num_envs)).astype(
      spec.dtype)


def _trajectory(batch, actions):
  timesteps = [batch.reset()]
  for step_actions in actions:
    timesteps.append(batch.step(step_actions))
  return timesteps


def _check_auto_reset(timesteps):
  """Per environment: FIRST exactly after LAST; FIRST has reward 0,
  discount 1; the batched fields have the right shapes and dtypes."""
  num_envs = timesteps[0].step_type.shape[0]
  assert (timesteps[0].step_type == batched.FIRST).all()
  seen_last = np.zeros(num_envs, bool)
  for previous, current in zip(timesteps, timesteps[1:]):
    assert current.step_type.dtype == np.int8
    assert current.reward.dtype == np.float32
    assert current.discount.dtype == np.float32
    assert current.reward.shape == current.discount.shape == (num_envs,)
    np.testing.assert_array_equal(current.first(), previous.last())
    assert (current.reward[current.first()] == 0.).all()
    assert (current.discount[current.first()] == 1.).all()
    seen_last |= current.last()
  assert seen_last.all(), 'every environment should finish an episode'


@pytest.mark.parametrize('spec, kind', [
    ('catch', 'serial'), ('catch', 'process'), ('gym:CartPole-v1', 'serial'),
    ('envpool:CartPole-v1', 'envpool'), ('atari:Pong', 'envpool')])
def test_auto_reset_semantics(spec, kind):
  kwargs = dict(max_episode_steps=20) if spec.startswith('atari') else {}
  with environments.make_batched(spec, 3, seed=0, kind=kind,
                                 **kwargs) as batch:
    steps = 60
    timesteps = _trajectory(batch, _random_actions(batch, steps))
  _check_auto_reset(timesteps)
  assert timesteps[1].observation.shape == (3,) + batch.observation_spec(
  ).shape


def test_batched_catch_matches_single_environments():
  batch = environments.make_batched('catch', 3, seed=7)
  singles = [environments.make('catch', seed=7 + i) for i in range(3)]
  actions = _random_actions(batch, 25)
  timesteps = _trajectory(batch, actions)
  for i, env in enumerate(singles):
    expected = env.reset()
    np.testing.assert_array_equal(timesteps[0].observation[i],
                                  expected.observation)
    for t, step_actions in enumerate(actions):
      expected = env.step(step_actions[i])
      got = timesteps[t + 1].unbatch(i)
      assert got.step_type == expected.step_type
      np.testing.assert_array_equal(got.observation, expected.observation)
      if expected.first():
        assert got.reward is None and got.discount is None
      else:
        assert got.reward == expected.reward
        assert got.discount == expected.discount


@pytest.mark.parametrize('spec, context', [('gym:CartPole-v1', 'forkserver'),
                                           ('catch', 'spawn')])
def test_serial_and_process_batches_are_identical(spec, context):
  serial = environments.make_batched(spec, 4, seed=11, kind='serial')
  process = environments.make_batched(spec, 4, seed=11, kind='process',
                                      num_workers=2, context=context)
  try:
    actions = _random_actions(serial, 80)
    for a, b in zip(_trajectory(serial, actions),
                    _trajectory(process, actions)):
      np.testing.assert_array_equal(a.step_type, b.step_type)
      np.testing.assert_array_equal(a.reward, b.reward)
      np.testing.assert_array_equal(a.discount, b.discount)
      np.testing.assert_array_equal(a.observation, b.observation)
  finally:
    serial.close()
    process.close()


def test_envpool_batch_matches_serial_envpool_singles():
  native = environments.make_batched('envpool:CartPole-v1', 3, seed=5,
                                     kind='envpool')
  serial = environments.make_batched('envpool:CartPole-v1', 3, seed=5)
  actions = _random_actions(native, 40)
  for a, b in zip(_trajectory(native, actions), _trajectory(serial, actions)):
    np.testing.assert_array_equal(a.step_type, b.step_type)
    np.testing.assert_allclose(a.observation, b.observation)


def test_process_batch_with_nested_observations_and_shared_workers():
  spec = lambda seed: environments.ObservationActionReward(  # pylint: disable=g-long-lambda
      environments.make('catch:4x3', seed=seed))
  with environments.make_batched(spec, 5, seed=0, kind='process',
                                 num_workers=2) as batch:
    assert batch.num_workers == 2
    assert isinstance(batch.observation_spec(), environments.OAR)
    timestep = batch.reset()
    assert timestep.observation.observation.shape == (5, 4, 3)
    timestep = batch.step(np.full(5, 2, np.int32))
    np.testing.assert_array_equal(timestep.observation.action, 2)


@pytest.mark.parametrize('how, message', [
    ('exit', r"worker 1 \(environments 2-3 of 'crashing'\) died with exit "
     'code 3 during step'),
    ('raise', r"environment 3 of 'crashing' \(in worker 1\) raised "
     'RuntimeError: boom during step')])
def test_crashed_worker_raises_a_named_error(how, message):
  # Defined here so that cloudpickle sends it by value to the workers.
  class _CrashingEnvironment(dm_env.Environment):
    """Catch that kills its process (or raises) at a given step."""

    def __init__(self, seed, crash_at, how):
      self._env = environments.Catch(seed=seed)
      self._steps = 0
      self._crash_at = crash_at
      self._how = how

    def reset(self):
      return self._env.reset()

    def step(self, action):
      self._steps += 1
      if self._steps == self._crash_at:
        if self._how == 'exit':
          os._exit(3)  # pylint: disable=protected-access
        raise RuntimeError('boom')
      return self._env.step(action)

    def observation_spec(self):
      return self._env.observation_spec()

    def action_spec(self):
      return self._env.action_spec()

  def crashing(seed):
    return _CrashingEnvironment(seed, 3 if seed == 3 else 10**6, how)
  crashing.__name__ = 'crashing'
  batch = environments.make_batched(crashing, 4, seed=0, kind='process',
                                    num_workers=2)
  processes = list(batch._resources.processes)  # pylint: disable=protected-access
  batch.reset()
  actions = np.ones(4, np.int32)
  batch.step(actions)
  batch.step(actions)
  with pytest.raises(environments.WorkerError, match=message):
    batch.step(actions)
  with pytest.raises(environments.WorkerError, match='unusable'):
    batch.step(actions)
  assert not any(p.is_alive() for p in processes)


def test_construction_error_is_named():
  with pytest.raises(environments.WorkerError, match=r"environment 1 of .*"
                     r"raised ValueError.*during start"):
    environments.make_batched(
        lambda seed: environments.Catch(rows=1 if seed == 1 else 10),
        2, seed=0, kind='process', num_workers=2)


def test_process_workers_end_on_close_and_on_garbage_collection():
  children_before = set(psutil.Process().children())
  batch = environments.make_batched('catch', 2, seed=0, kind='process')
  workers = list(batch._resources.processes)  # pylint: disable=protected-access
  assert all(w.is_alive() for w in workers)
  batch.close()
  batch.close()  # Idempotent.
  assert not any(w.is_alive() for w in workers)
  with pytest.raises(environments.WorkerError, match='closed'):
    batch.reset()
  batch = environments.make_batched('catch', 2, seed=0, kind='process')
  workers = list(batch._resources.processes)  # pylint: disable=protected-access
  del batch
  gc.collect()
  assert not any(w.is_alive() for w in workers)
  leftover = set(psutil.Process().children()) - children_before
  # multiprocessing's own helpers live as long as the process that started
  # them (the fork server is started again if an earlier one ended).
  helpers = ('resource_tracker', 'forkserver')
  assert not [p for p in leftover if p.is_running() and
              p.status() != psutil.STATUS_ZOMBIE and
              not any(h in ' '.join(p.cmdline()) for h in helpers)]


def test_process_workers_end_at_interpreter_exit():
  code = (
      'from repertory import environments\n'
      'if __name__ == "__main__":\n'
      '  batch = environments.make_batched("catch", 2, kind="process")\n'
      '  batch.reset()\n'
      '  print(*[p.pid for p in batch._resources.processes])\n')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, timeout=120, check=True).stdout
  pids = [int(pid) for pid in out.split()]
  assert len(pids) == 2
  deadline = time.monotonic() + 10
  while time.monotonic() < deadline and any(map(_running, pids)):
    time.sleep(0.1)
  assert not any(map(_running, pids))


def _running(pid: int) -> bool:
  try:
    return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
  except psutil.NoSuchProcess:
    return False


def test_make_batched_rejects_bad_input():
  with pytest.raises(ValueError, match="'threads'.*serial"):
    environments.make_batched('catch', 2, kind='threads')
  with pytest.raises(ValueError, match="kind='envpool' cannot batch 'catch'"):
    environments.make_batched('catch', 2, kind='envpool')
  with pytest.raises(ValueError, match='num_envs'):
    environments.make_batched('catch', 0)
  with pytest.raises(environments.UnknownEnvironmentError, match="'nope'"):
    environments.make_batched('nope', 2, kind='process')
  with pytest.raises(ValueError, match='leading dimension'):
    environments.make_batched('catch', 2).step(np.zeros(3, np.int32))


def test_atari_episodic_life_continues_the_game():
  env = environments.make('atari:Breakout', seed=0)
  env.reset()
  assert env.last_info['lives'][0] == 5
  rng = np.random.RandomState(0)
  for _ in range(1000):
    timestep = env.step(rng.randint(4))
    if timestep.last():
      break
  assert timestep.last() and timestep.discount == 0.
  lives = env.last_info['lives'][0]
  assert lives == 4
  assert env.step(0).first()
  assert env.last_info['lives'][0] == lives  # Same game, one life fewer.
  evaluation = environments.make('atari:Breakout', seed=0,
                                 episodic_life=False)
  evaluation.reset()
  for _ in range(1000):
    timestep = evaluation.step(rng.randint(4))
    if evaluation.last_info['lives'][0] < 5:
      break
  assert evaluation.last_info['lives'][0] == 4
  assert not timestep.last()  # Losing a life does not end the episode.


def test_batched_episode_statistics():
  with environments.BatchedEpisodeStatistics(
      environments.make_batched('catch:4x3', 2, seed=0)) as batch:
    batch.reset()
    assert batch.pop_finished() == []
    for _ in range(3):
      timestep = batch.step(np.ones(2, np.int32))
    finished = batch.pop_finished()
    assert [(i, length) for i, _, length in finished] == [(0, 3), (1, 3)]
    assert [r for _, r, _ in finished] == list(timestep.reward)
    batch.step(np.ones(2, np.int32))  # FIRST steps.
    batch.step(np.ones(2, np.int32))
    assert batch.pop_finished() == []


def test_unpicklable_factory_is_reported_before_starting_workers():
  import threading  # pylint: disable=g-import-not-at-top
  lock = threading.Lock()

  def factory(seed):
    del seed
    assert lock  # Captures a lock: cannot be pickled.
    return environments.Catch()
  with pytest.raises(TypeError, match='picklable'):
    environments.make_batched(factory, 2, seed=0, kind='process')
