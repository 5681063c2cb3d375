"""NStepTransitionAdder against a real Reverb server.

Observations are 1, 2, ...; action k leads to observation k + 1 with reward
r_k and discount d_k (the last timestep is LAST).
"""

import dm_env
import numpy as np
import pytest
from dm_env import specs

from repertory import testing
from repertory.components import adders

GAMMA = 0.5


def run_episode(adder, rewards, discounts):
  adder.add_first(dm_env.restart(np.float32(1)))
  n = len(rewards)
  for k, (r, d) in enumerate(zip(rewards, discounts), start=1):
    step_type = dm_env.StepType.LAST if k == n else dm_env.StepType.MID
    adder.set_policy_version(k)
    adder.add(np.int32(k), dm_env.TimeStep(step_type, np.float32(r),
                                           np.float32(d), np.float32(k + 1)),
              extras={'q': np.float32(k)})


# (n_step, rewards, discounts,
#  expected items (observation, action, reward, discount, next_observation))
CASES = {
    'terminal': (2, [1, 2, 3], [1, 1, 0], [
        (1, 1, 1 + 0.5 * 2, 0.25, 3),
        (2, 2, 2 + 0.5 * 3, 0.0, 4),
        (3, 3, 3, 0.0, 4),
    ]),
    'truncated_keeps_bootstrap': (2, [1, 2, 3], [1, 1, 1], [
        (1, 1, 2.0, 0.25, 3),
        (2, 2, 3.5, 0.25, 4),
        (3, 3, 3.0, 0.5, 4),
    ]),
    'episode_shorter_than_n': (3, [4], [0], [
        (1, 1, 4.0, 0.0, 2),
    ]),
    'one_step': (1, [1, 2], [1, 1], [
        (1, 1, 1.0, 0.5, 2),
        (2, 2, 2.0, 0.5, 3),
    ]),
    'discount_mid_episode': (3, [1, 1, 1, 1], [1, 0.5, 1, 0], [
        (1, 1, 1 + 0.5 + 0.5 * 0.5 * 0.5, 0.125 * 0.5, 4),
        (2, 2, 1 + 0.5 * 0.5 + 0.25 * 0.5, 0.0, 5),
        (3, 3, 1 + 0.5, 0.0, 5),
        (4, 4, 1.0, 0.0, 5),
    ]),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_n_step_transitions(case, make_client, read_all, env_spec):
  n_step, rewards, discounts, expected = CASES[case]
  sig = adders.NStepTransitionAdder.signature(
      env_spec, extras_spec={'q': np.float32(0)})
  client = make_client({'replay': sig})
  adder = adders.NStepTransitionAdder(client, n_step, GAMMA, 'replay',
                                      actor_id=2)
  run_episode(adder, rewards, discounts)
  run_episode(adder, rewards, discounts)  # A second episode starts afresh.
  adder.flush()
  items = read_all(client, 'replay')
  assert len(items) == 2 * len(expected)
  for got, want in zip(items, expected + expected):
    obs, act, ret, disc, next_obs = want
    assert got['observation'] == obs, case
    assert got['action'] == act, case
    np.testing.assert_allclose(got['reward'], ret, err_msg=case)
    np.testing.assert_allclose(got['discount'], disc, err_msg=case)
    assert got['next_observation'] == next_obs, case
    assert got['extras']['q'] == act
    assert got['policy_version'] == act  # version at the item's first step.
    assert got['actor_id'] == 2


def test_priority_fn_sees_the_item(make_client, env_spec):
  sig = adders.NStepTransitionAdder.signature(env_spec,
                                              extras_spec={'q': np.float32(0)})
  client = make_client({'replay': sig})
  adder = adders.NStepTransitionAdder(
      client, 1, GAMMA, 'replay',
      priority_fn=lambda item: float(item['reward']) + 1.0)
  run_episode(adder, [3, 5], [1, 0])
  adder.flush()
  samples = list(client.sample('replay', 2, emit_timesteps=False))
  assert sorted(s.info.priority for s in samples) == [4.0, 6.0]


def test_nested_observations_and_extras_reach_their_fields(make_client):
  """Items of nested steps: every leaf lands in its own field of the item
  (the adder writes its columns in its own order, the item in the table
  signature's)."""
  spec = adders.EnvironmentSpec(
      observations={'pixels': specs.Array((2,), np.uint8),
                    'a_count': specs.Array((), np.int64)},
      actions=specs.Array((), np.int32),
      rewards=specs.Array((), np.float32),
      discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))
  extras = lambda k: {'z': np.float32(k), 'b': np.int32(-k)}
  client = make_client({'replay': adders.NStepTransitionAdder.signature(
      spec, extras_spec=extras(0))})
  adder = adders.NStepTransitionAdder(client, 2, GAMMA, 'replay')
  observation = lambda k: {'pixels': np.array([k, 10 * k], np.uint8),
                           'a_count': np.int64(100 + k)}
  adder.add_first(dm_env.restart(observation(1)))
  for k in (1, 2, 3):
    step_type = dm_env.StepType.LAST if k == 3 else dm_env.StepType.MID
    adder.add(np.int32(k), dm_env.TimeStep(step_type, np.float32(k),
                                           np.float32(1), observation(k + 1)),
              extras=extras(k))
  adder.flush()
  items = testing.read_queue(client, 'replay')
  # Starts 1 and 2 span two steps; start 3 is the tail.
  assert [(int(i['action']), int(i['next_observation']['a_count']))
          for i in items] == [(1, 103), (2, 104), (3, 104)]
  for item in items:
    k = int(item['action'])
    np.testing.assert_array_equal(item['observation']['pixels'], [k, 10 * k])
    assert item['observation']['a_count'] == 100 + k
    assert item['extras'] == {'z': k, 'b': -k}
  np.testing.assert_allclose([i['reward'] for i in items],
                             [1 + GAMMA * 2, 2 + GAMMA * 3, 3])
