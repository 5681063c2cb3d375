"""Every adder follows the environment's reward and discount specs: a vector
reward (one per player of a game) is written as a vector, checked against
plain sums, and a reward of the wrong shape is refused in one line."""

import dm_env
from dm_env import specs
import numpy as np
import pytest

from repertory.components import adders

N = 2  # players: rewards and discounts are [2].
VECTOR_SPEC = adders.EnvironmentSpec(
    observations=specs.Array((), np.float32),
    actions=specs.Array((), np.int32),
    rewards=specs.Array((N,), np.float32),
    discounts=specs.BoundedArray((N,), np.float32, 0.0, 1.0))

REWARDS = np.array([[1.0, -1.0], [0.5, 2.0], [3.0, -3.0]], np.float32)
DISCOUNTS = np.array([[1.0, 1.0], [1.0, 0.5], [0.0, 0.0]], np.float32)


def episode():
  """(first timestep, [(action, next timestep)]) of a 3-step episode."""
  steps = []
  for k in range(3):
    step_type = dm_env.StepType.LAST if k == 2 else dm_env.StepType.MID
    steps.append((np.int32(k), dm_env.TimeStep(
        step_type, REWARDS[k], DISCOUNTS[k], np.float32(k + 1))))
  return dm_env.restart(np.float32(0)), steps


def play(adder):
  first, steps = episode()
  adder.add_first(first)
  for action, timestep in steps:
    adder.add(action, timestep)
  adder.flush()


def test_signature_takes_the_spec_shapes():
  sig = adders.episode_signature(VECTOR_SPEC)
  assert sig['reward'].shape.as_list() == [None, N]
  assert sig['discount'].shape.as_list() == [None, N]
  sig = adders.n_step_transition_signature(VECTOR_SPEC)
  assert sig['reward'].shape.as_list() == [N]
  scalar = adders.EnvironmentSpec(VECTOR_SPEC.observations,
                                  VECTOR_SPEC.actions, None, None)
  assert adders.unroll_signature(scalar, 4)['reward'].shape.as_list() == [5]


def test_episode_adder_writes_vector_rewards(make_client, read_all):
  client = make_client({'q': adders.episode_signature(VECTOR_SPEC)})
  play(adders.EpisodeAdder(client, 'q', max_sequence_length=10))
  [item] = read_all(client, 'q')
  # Steps 0..2 hold the reward of the timestep that followed; the final
  # step (the LAST observation) holds zeros.
  np.testing.assert_array_equal(item['reward'],
                                np.concatenate([REWARDS, np.zeros((1, N))]))
  np.testing.assert_array_equal(item['discount'],
                                np.concatenate([DISCOUNTS, np.zeros((1, N))]))


def test_sequence_adder_writes_vector_rewards(make_client, read_all):
  sig = adders.sequence_signature(VECTOR_SPEC, sequence_length=4)
  client = make_client({'q': sig})
  play(adders.SequenceAdder(client, 'q', sequence_length=4, period=4))
  items = read_all(client, 'q')
  assert items
  np.testing.assert_array_equal(items[0]['reward'][:3], REWARDS)
  assert items[0]['reward'].shape == (4, N)


def test_n_step_adder_sums_vector_rewards(make_client, read_all):
  gamma = 0.5
  sig = adders.n_step_transition_signature(VECTOR_SPEC)
  client = make_client({'q': sig})
  play(adders.NStepTransitionAdder(client, 2, gamma, 'q'))
  items = read_all(client, 'q')
  # Plain reference, per player: R = r_t + gamma d_t r_{t+1},
  # D = gamma d_t gamma d_{t+1} (shorter at the end).
  expected = []
  for t in range(3):
    ret, disc = np.zeros(N), np.ones(N)
    for k in range(t, min(t + 2, 3)):
      ret = ret + disc * REWARDS[k]
      disc = disc * gamma * DISCOUNTS[k]
    expected.append((ret, disc))
  assert len(items) == 3
  for got, (ret, disc) in zip(items, expected):
    np.testing.assert_allclose(got['reward'], ret)
    np.testing.assert_allclose(got['discount'], disc)


def test_unroll_adder_writes_vector_rewards(make_client, read_all):
  T, B = 3, 1
  client = make_client({'q': adders.unroll_signature(VECTOR_SPEC, T)})
  adder = adders.UnrollAdder(client, 'q', T, B, environment_spec=VECTOR_SPEC)
  first, steps = episode()
  batch = lambda ts: dm_env.TimeStep(  # pylint: disable=g-long-lambda
      np.array([ts.step_type], np.int32),
      None if ts.reward is None else ts.reward[None],
      None if ts.discount is None else ts.discount[None],
      np.array([ts.observation]))
  adder.add_first(batch(first))
  for action, timestep in steps:
    adder.add(np.array([action]), batch(timestep))
  adder.flush()
  [item] = read_all(client, 'q')
  np.testing.assert_array_equal(item['reward'][1:], REWARDS)
  np.testing.assert_array_equal(item['discount'][1:], DISCOUNTS)


def test_scalar_adders_refuse_vector_rewards_in_one_line(make_client):
  scalar = adders.EnvironmentSpec(VECTOR_SPEC.observations,
                                  VECTOR_SPEC.actions,
                                  specs.Array((), np.float32), None)
  client = make_client({'q': adders.unroll_signature(scalar, 3)})
  adder = adders.UnrollAdder(client, 'q', 3, 1, environment_spec=scalar)
  adder.add_first(dm_env.TimeStep(np.array([0], np.int32), None, None,
                                  np.zeros(1, np.float32)))
  with pytest.raises(ValueError, match=r'a reward of shape \(1, 2\), '
                     r'expected \(1,\)') as e:
    adder.add(np.zeros(1, np.int32), dm_env.TimeStep(
        np.array([1], np.int32), REWARDS[:1], DISCOUNTS[:1, 0],
        np.zeros(1, np.float32)))
  assert '\n' not in str(e.value)
  n_step = adders.NStepTransitionAdder(
      make_client({'r': adders.n_step_transition_signature(VECTOR_SPEC)}),
      1, 0.9, 'r')
  first, steps = episode()
  n_step.add_first(first)
  n_step.add(*steps[0])
  with pytest.raises(ValueError, match=r'NStepTransitionAdder: a reward of '
                     r'shape \(\), but this adder writes rewards of shape '
                     r'\(2,\)'):
    n_step.add(np.int32(1), dm_env.transition(np.float32(1), np.float32(2)))
