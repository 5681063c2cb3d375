"""`PerEnvironmentAdder` against one adder per environment fed by hand.

Two environments with episodes of different lengths step as one batch that
resets an environment on the step after its LAST (as `BatchedEnvironment`
does); the fanned-out n-step adders must write exactly the items that
per-environment adders write when each is given its own environment's
steps directly.
"""

import dm_env
import numpy as np
import pytest

from repertory.components import adders

GAMMA = 0.9
# Per environment: its episodes, each a list of (reward, discount).
EPISODES = [
    [[(1, 1), (2, 1), (3, 0)], [(5, 1), (6, 1)]],
    [[(4, 0)], [(7, 1), (8, 1), (9, 1), (1, 0)]],
]
NUM_STEPS = 7  # Batched steps after the first reset.


def _per_environment_steps(j):
  """Environment j's timesteps and actions, as a batch of `NUM_STEPS` would
  produce them: [(action or None, timestep)], action None for add_first."""
  steps, obs = [], 100.0 * j
  episodes = iter(EPISODES[j] * 4)
  episode, k = next(episodes), 0
  steps.append((None, dm_env.restart(np.float32(obs))))
  for t in range(NUM_STEPS):
    obs += 1
    action = np.int32(10 * t + j)
    if k == len(episode):  # The step after LAST: the batch resets it.
      episode, k = next(episodes), 0
      steps.append((action, dm_env.restart(np.float32(obs))))
      continue
    reward, discount = episode[k]
    k += 1
    step_type = (dm_env.StepType.LAST if k == len(episode) else
                 dm_env.StepType.MID)
    steps.append((action, dm_env.TimeStep(step_type, np.float32(reward),
                                          np.float32(discount),
                                          np.float32(obs))))
  return steps


def _batched(timesteps):
  """One batched `TimeStep` of per-environment ones (reward 0 on FIRST)."""
  value = lambda x: np.float32(0 if x is None else x)
  return dm_env.TimeStep(
      step_type=np.array([int(t.step_type) for t in timesteps], np.int32),
      reward=np.array([value(t.reward) for t in timesteps]),
      discount=np.array([value(t.discount) for t in timesteps]),
      observation=np.array([t.observation for t in timesteps]))


def _items(client, table, read_all):
  return sorted(
      ((int(i['actor_id']), float(i['observation']), int(i['action']),
        round(float(i['reward']), 6), round(float(i['discount']), 6),
        float(i['next_observation'])) for i in read_all(client, table)))


def test_fanned_out_batches_write_what_per_environment_adders_write(
    make_client, read_all, env_spec):
  signature = adders.NStepTransitionAdder.signature(env_spec)
  client = make_client({'fanned': signature, 'direct': signature})
  make = lambda table, j: adders.NStepTransitionAdder(
      client, 2, GAMMA, table, actor_id=j)
  streams = [_per_environment_steps(j) for j in range(2)]

  fanned = adders.PerEnvironmentAdder([make('fanned', j) for j in range(2)])
  fanned.add_first(_batched([s[0][1] for s in streams]))
  for t in range(1, NUM_STEPS + 1):
    fanned.add(np.array([s[t][0] for s in streams]),
               _batched([s[t][1] for s in streams]))
  fanned.flush()

  for j, stream in enumerate(streams):  # The reference: one by one.
    adder = make('direct', j)
    for action, timestep in stream:
      if timestep.first():
        adder.add_first(timestep)
      else:
        adder.add(action, timestep)
    adder.flush()

  direct = _items(client, 'direct', read_all)
  assert len(direct) >= 6  # Both environments finished episodes.
  assert _items(client, 'fanned', read_all) == direct


def test_a_batch_of_the_wrong_size_is_refused(make_client, env_spec):
  client = make_client(
      {'t': adders.NStepTransitionAdder.signature(env_spec)})
  fanned = adders.PerEnvironmentAdder(
      [adders.NStepTransitionAdder(client, 1, GAMMA, 't') for _ in range(2)])
  with pytest.raises(ValueError, match=r'expects step_type of shape \(2,\), '
                     r'got \(3,\)'):
    fanned.add_first(_batched([dm_env.restart(np.float32(0))] * 3))
  with pytest.raises(ValueError, match='one adder per environment'):
    adders.PerEnvironmentAdder([])
