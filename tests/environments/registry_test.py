"""Tests for `environments.make`, `register` and their errors."""

import subprocess
import sys

import dm_env
import gymnasium
import numpy as np
import pytest

from repertory import environments
from repertory.environments import registry


def _rollout(env, actions):
  timesteps = [env.reset()]
  for action in actions:
    timesteps.append(env.step(action))
  return timesteps


@pytest.mark.parametrize('spec', [
    'catch', 'bsuite:catch/0', 'gym:CartPole-v1', 'minatar:breakout',
    'envpool:CartPole-v1', 'atari:Pong'])
def test_same_seed_same_trajectory(spec):
  actions = [1, 0, 2, 1, 1, 0, 0, 2, 1, 0] * 3
  if spec == 'gym:CartPole-v1' or spec == 'envpool:CartPole-v1':
    actions = [a % 2 for a in actions]
  a = _rollout(environments.make(spec, seed=3), actions)
  b = _rollout(environments.make(spec, seed=3), actions)
  for x, y in zip(a, b):
    assert x.step_type == y.step_type
    np.testing.assert_array_equal(x.observation, y.observation)
    assert x.reward == y.reward


def test_different_seeds_differ():
  first = [environments.make('catch', seed=s).reset().observation
           for s in range(10)]
  assert len({o.tobytes() for o in first}) > 1


def test_catch_sizes():
  env = environments.make('catch:6x4')
  assert env.observation_spec().shape == (6, 4)
  assert environments.make('catch', rows=7, columns=3).observation_spec(
  ).shape == (7, 3)


@pytest.mark.parametrize('spec, mentions', [
    ('nope', ["'nope'", 'gym:<id>', 'repertory[envs]', 'repertory[envpool]']),
    ('gym:NoSuchEnv-v0', ["'gym:NoSuchEnv-v0'", 'gymnasium has no']),
    ('bsuite:catch/999', ["'bsuite:catch/999'"]),
    ('minatar:pong', ["'minatar:pong'", 'breakout']),
    ('atari:Pongg', ["'atari:Pongg'", 'Pong']),
    ('envpool:Nope-v1', ["'envpool:Nope-v1'"]),
    ('catch:10', ["'catch:10'", 'catch:<rows>x<columns>']),
    ('gym:', ["'gym:'"]),
])
def test_unknown_spec_error_names_spec_and_forms(spec, mentions):
  with pytest.raises(environments.UnknownEnvironmentError) as error:
    environments.make(spec)
  for text in mentions:
    assert text in str(error.value)
  assert 'Known forms' in str(error.value)


def test_missing_suite_names_the_extra():
  # A fresh interpreter in which 'minatar' cannot be imported.
  code = (
      'import sys; sys.modules["minatar"] = None\n'
      'from repertory import environments\n'
      'try:\n'
      '  environments.make("minatar:breakout")\n'
      'except environments.MissingSuiteError as e:\n'
      '  print(e)\n')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, timeout=60, check=True).stdout
  assert "'minatar:breakout'" in out
  assert "pip install 'repertory[envs]'" in out


def test_import_does_not_import_tensorflow_or_suites():
  code = (
      'import sys\n'
      'from repertory import environments\n'
      'env = environments.make("catch", seed=0)\n'
      'env = environments.StepLimit(environments.SinglePrecision(env), 5)\n'
      'b = environments.make_batched("catch", 2, seed=0)\n'
      'b.step(b.reset().step_type * 0)\n'
      'print(sorted(m for m in ("tensorflow", "gymnasium", "bsuite", '
      '"envpool", "minatar", "reverb", "sonnet") if m in sys.modules))\n')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, timeout=60, check=True).stdout
  assert out.strip() == '[]'


def test_register_exact_name_and_prefix():
  environments.register(
      'test_small_catch',
      lambda seed=None, rows=4: environments.Catch(rows, 3, seed=seed))
  environments.register(
      'testsuite:', lambda size, seed=None: environments.Catch(
          int(size), 2, seed=seed))
  try:
    assert environments.make('test_small_catch').observation_spec(
    ).shape == (4, 3)
    assert environments.make('test_small_catch', rows=6).observation_spec(
    ).shape == (6, 3)
    assert environments.make('testsuite:8').observation_spec().shape == (8, 2)
    with pytest.raises(environments.UnknownEnvironmentError) as error:
      environments.make('unregistered')
    assert "'test_small_catch'" in str(error.value)
  finally:
    registry._REGISTRY.clear()  # pylint: disable=protected-access


def test_register_rejects_built_in_forms():
  with pytest.raises(ValueError, match='built-in'):
    environments.register('gym:', lambda: None)


def test_make_accepts_factories_and_instances():
  env = environments.make(lambda: gymnasium.make('CartPole-v1'), seed=1)
  assert isinstance(env, environments.GymAdapter)
  again = environments.make(lambda: gymnasium.make('CartPole-v1'), seed=1)
  np.testing.assert_array_equal(env.reset().observation,
                                again.reset().observation)
  catch = environments.Catch(seed=0)
  assert environments.make(catch) is catch
  seeded = environments.make(lambda seed: environments.Catch(seed=seed),
                             seed=5)
  assert seeded.reset().observation.shape == (10, 5)
  gym_env = environments.make(gymnasium.make('CartPole-v1'), seed=0)
  assert isinstance(gym_env, dm_env.Environment)
  with pytest.raises(TypeError, match='neither'):
    environments.make(lambda: 42)


def test_bsuite_seed_is_used():
  a = environments.make('bsuite:catch/0', seed=1)
  b = environments.make('bsuite:catch/0', seed=1)
  firsts_a = [a.reset().observation.argmax() for _ in range(5)]
  firsts_b = [b.reset().observation.argmax() for _ in range(5)]
  assert firsts_a == firsts_b
