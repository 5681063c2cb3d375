"""UnrollAdder: batched [T + 1] unrolls against a real Reverb server."""

import dm_env
from dm_env import specs
import numpy as np
import pytest

from repertory.components import adders

F, M, L = 0, 1, 2
N, T = 2, 3


def batched(step_type, reward, discount, obs):
  return dm_env.TimeStep(np.asarray(step_type), np.asarray(reward, np.float32),
                         np.asarray(discount, np.float32),
                         np.asarray(obs, np.float32))


# Env 0 ends its episode at step 2 (LAST, discount 0) and auto-resets at
# step 3 (FIRST); env 1 is truncated at step 4 (LAST, discount 1).
# Observation of env e at step k: 10 * e + k.
STEP_TYPES = [[F, F], [M, M], [L, M], [F, M], [M, L], [M, F], [M, M]]
DISCOUNTS = [[1, 1], [1, 1], [0, 1], [1, 1], [1, 1], [1, 1], [1, 1]]


def timestep(k):
  return batched(STEP_TYPES[k], [k, 10 + k] if k else [0, 0], DISCOUNTS[k],
                 [k, 10 + k])


def test_unrolls_overlap_and_cross_episode_boundaries(make_client, read_all,
                                                      env_spec):
  sig = adders.UnrollAdder.signature(
      env_spec, T, extras_spec={'logits': specs.Array((2,), np.float32)},
      core_state_spec=specs.Array((), np.float32))
  client = make_client({'queue': sig})
  adder = adders.UnrollAdder(client, 'queue', T, N, actor_id=4,
                             environment_spec=env_spec)
  adder.add_first(timestep(0))
  for k in range(1, 7):
    adder.set_policy_version(k)
    actions = np.array([k, 10 + k]) - 1  # action on step k - 1 (int64).
    adder.add(actions, timestep(k),
              extras={'logits': np.full((N, 2), k - 1, np.float32)},
              core_state=np.array([100 + k - 1, 200 + k - 1], np.float32))
  adder.flush()
  items = read_all(client, 'queue')
  # Two unrolls (steps 0..3, 3..6) of two envs each, env 0 first.
  assert len(items) == 4
  for u, first in enumerate([0, 3]):
    for e in range(N):
      got = items[2 * u + e]
      steps = np.arange(first, first + T + 1)
      np.testing.assert_array_equal(got['observation'], 10 * e + steps)
      np.testing.assert_array_equal(
          got['step_type'], [STEP_TYPES[k][e] for k in steps])
      np.testing.assert_array_equal(
          got['discount'], [DISCOUNTS[k][e] for k in steps])
      rewards = [10 * e + k if k else 0 for k in steps]
      np.testing.assert_array_equal(got['reward'], rewards)
      # Actions on steps first..first+T-1; zeros at index T.
      np.testing.assert_array_equal(
          got['action'], list(10 * e + steps[:-1]) + [0])
      assert got['action'].dtype == np.int32  # Cast to the spec's dtype.
      np.testing.assert_array_equal(got['extras']['logits'][:, 0],
                                    list(steps[:-1]) + [0])
      assert got['core_state'] == 100 * (e + 1) + first
      assert got['policy_version'] == first + 1
      assert got['actor_id'] == 4


def test_wrong_batch_size_is_explained(make_client, env_spec):
  client = make_client({'queue': adders.UnrollAdder.signature(env_spec, T)})
  adder = adders.UnrollAdder(client, 'queue', T, num_envs=3)
  with pytest.raises(ValueError, match='num_envs=3'):
    adder.add_first(timestep(0))


def test_add_before_add_first(make_client, env_spec):
  client = make_client({'queue': adders.UnrollAdder.signature(env_spec, T)})
  adder = adders.UnrollAdder(client, 'queue', T, N)
  with pytest.raises(RuntimeError, match='add_first'):
    adder.add(np.zeros(N, np.int32), timestep(1))


def test_time_major_transitions_mask_the_auto_resets(make_client, read_all,
                                                      env_spec):
  sig = adders.UnrollAdder.signature(
      env_spec, T, extras_spec={'logits': specs.Array((2,), np.float32)})
  client = make_client({'queue': sig})
  adder = adders.UnrollAdder(client, 'queue', T, N, environment_spec=env_spec)
  adder.add_first(timestep(0))
  for k in range(1, 7):
    adder.add(np.array([k, 10 + k]) - 1, timestep(k),
              extras={'logits': np.full((N, 2), k - 1, np.float32)})
  adder.flush()
  items = read_all(client, 'queue')  # [unroll 0 env 0, env 1, unroll 1 ...]
  batch = {key: np.stack([item[key] for item in items[2:]])  # Unroll 1.
           for key in ('observation', 'action', 'reward', 'discount',
                       'step_type')}
  batch['extras'] = {'logits': np.stack(
      [item['extras']['logits'] for item in items[2:]])}
  got = adders.time_major_transitions(batch)
  # Steps 3..6: env 0 is FIRST at 3 (the unroll's start, not a transition
  # boundary); env 1 is FIRST at 5, so transition 4 -> 5 is masked.
  np.testing.assert_array_equal(got.mask.numpy(), [[1, 1], [1, 0], [1, 1]])
  np.testing.assert_array_equal(got.first.numpy()[:, 1],
                                [False, False, True, False])
  np.testing.assert_array_equal(got.observation.numpy()[:, 0], [3, 4, 5, 6])
  np.testing.assert_array_equal(got.action.numpy(),
                                [[3, 13], [4, 14], [5, 15]])
  np.testing.assert_array_equal(got.extras['logits'].numpy()[:, 0, 0],
                                [3, 4, 5])
  np.testing.assert_array_equal(got.reward.numpy(), [[4, 14], [5, 0], [6, 16]])
  np.testing.assert_array_equal(got.discount.numpy(), [[1, 1], [1, 0], [1, 1]])


def test_a_priority_fn_sees_each_item_as_a_nest_and_items_are_the_same(
    make_client, read_all, env_spec):
  sig = adders.UnrollAdder.signature(env_spec, T)
  client = make_client({'flat': sig, 'nested': sig})
  seen = []

  def priority_fn(item):
    seen.append(item)
    return 1.0

  plain = adders.UnrollAdder(client, 'flat', T, N, actor_id=1,
                             environment_spec=env_spec)
  with_priority = adders.UnrollAdder(client, 'nested', T, N, actor_id=1,
                                     environment_spec=env_spec,
                                     priority_fn=priority_fn)
  for adder in (plain, with_priority):
    adder.add_first(timestep(0))
    for k in range(1, 7):
      adder.set_policy_version(k)
      adder.add(np.array([k, 10 + k]) - 1, timestep(k))
    adder.flush()
  flat, nested = read_all(client, 'flat'), read_all(client, 'nested')
  assert len(flat) == len(nested) == 4 and len(seen) == 4
  for a, b in zip(flat, nested):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
  np.testing.assert_array_equal(seen[1]['observation'], 10 + np.arange(T + 1))
  assert seen[3]['policy_version'] == 4


def test_batched_items_hold_every_environments_unroll(make_client, read_all,
                                                      env_spec):
  """One [N, T + 1] item per unroll; environment e's row is the item the
  per-environment adder writes (checked value by value in the first test)."""
  extras_spec = {'logits': specs.Array((2,), np.float32)}
  state_spec = specs.Array((), np.float32)
  client = make_client({
      'per_env': adders.UnrollAdder.signature(env_spec, T, extras_spec,
                                              state_spec),
      'batched': adders.UnrollAdder.signature(env_spec, T, extras_spec,
                                              state_spec, envs_per_item=N)})
  per_env = adders.UnrollAdder(client, 'per_env', T, N, actor_id=4,
                               environment_spec=env_spec)
  batched_adder = adders.UnrollAdder(client, 'batched', T, N, actor_id=4,
                                     environment_spec=env_spec,
                                     batched_items=True)
  for adder in (per_env, batched_adder):
    adder.add_first(timestep(0))
    for k in range(1, 7):
      adder.set_policy_version(k)
      adder.add(np.array([k, 10 + k]) - 1, timestep(k),
                extras={'logits': np.full((N, 2), k - 1, np.float32)},
                core_state=np.array([100 + k - 1, 200 + k - 1], np.float32))
    adder.flush()
  rows, items = read_all(client, 'per_env'), read_all(client, 'batched')
  assert len(rows) == 4 and len(items) == 2
  assert batched_adder.num_items == 2
  for u, item in enumerate(items):
    assert item['observation'].shape == (N, T + 1)
    np.testing.assert_array_equal(item['policy_version'], [3 * u + 1] * N)
    np.testing.assert_array_equal(item['actor_id'], [4] * N)
    for e in range(N):
      row = rows[N * u + e]
      for key in ('observation', 'action', 'reward', 'discount', 'step_type',
                  'core_state', 'policy_version', 'actor_id'):
        np.testing.assert_array_equal(item[key][e], row[key], err_msg=key)
      np.testing.assert_array_equal(item['extras']['logits'][e],
                                    row['extras']['logits'])


def test_batched_items_take_no_priority_fn(make_client, env_spec):
  client = make_client({'queue': adders.UnrollAdder.signature(env_spec, T)})
  with pytest.raises(ValueError, match='priority_fn must be None'):
    adders.UnrollAdder(client, 'queue', T, N, batched_items=True,
                       priority_fn=lambda item: 1.0)


def test_envs_per_item_below_one_is_refused(env_spec):
  with pytest.raises(ValueError, match='envs_per_item must be >= 1'):
    adders.UnrollAdder.signature(env_spec, T, envs_per_item=0)
