"""SequenceAdder and EpisodeAdder against a real Reverb server.

Episodes: the first observation is 1; action k (k = 1..n) leads to
observation k + 1 with reward k; the last timestep is LAST with the given
discount. Writer step i therefore holds observation i + 1, action i + 1,
reward i + 1, and the final step holds observation n + 1 with zero action,
reward and discount (step_type LAST). The recurrent state passed with
action k is 10 * k; the policy version set before action k is 100 + k.
"""

import dm_env
import numpy as np
import pytest

from repertory.components import adders

F, M, L = 0, 1, 2


def run_episode(adder, n, last_discount=0.0):
  adder.add_first(dm_env.restart(np.float32(1)))
  for k in range(1, n + 1):
    obs = np.float32(k + 1)
    if k < n:
      ts = dm_env.transition(np.float32(k), obs, np.float32(1))
    else:
      ts = dm_env.TimeStep(dm_env.StepType.LAST, np.float32(k),
                           np.float32(last_discount), obs)
    adder.set_policy_version(100 + k)
    adder.add(np.int32(k), ts, extras={'logp': np.float32(-k)},
              core_state=np.full(2, 10.0 * k, np.float32))


def item(obs, act, rew, disc, st, state0, version):
  return dict(observation=obs, action=act, reward=rew, discount=disc,
              step_type=st, core_state=[state0] * 2, policy_version=version)


# (sequence_length, period, end behaviour, episodes [(n, last discount)],
#  expected items in insertion order)
CASES = {
    'zero_pad_two_full_items': (
        3, 2, 'zero_pad', [(4, 0.0)], [
            item([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 1, 1], [F, M, M], 10,
                 101),
            item([3, 4, 5], [3, 4, 0], [3, 4, 0], [1, 0, 0], [M, M, L], 30,
                 103),
        ]),
    'zero_pad_pads_the_tail': (
        3, 2, 'zero_pad', [(5, 0.0)], [
            item([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 1, 1], [F, M, M], 10,
                 101),
            item([3, 4, 5], [3, 4, 5], [3, 4, 5], [1, 1, 0], [M, M, M], 30,
                 103),
            item([5, 6, 0], [5, 0, 0], [5, 0, 0], [0, 0, 0], [M, L, L], 50,
                 105),
        ]),
    'zero_pad_short_episode': (
        3, 2, 'zero_pad', [(1, 1.0)], [
            item([1, 2, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0], [F, L, L], 10,
                 101),
        ]),
    'truncate_writes_shorter_tail': (
        3, 2, 'truncate', [(5, 0.0)], [
            item([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 1, 1], [F, M, M], 10,
                 101),
            item([3, 4, 5], [3, 4, 5], [3, 4, 5], [1, 1, 0], [M, M, M], 30,
                 103),
            item([5, 6], [5, 0], [5, 0], [0, 0], [M, L], 50, 105),
        ]),
    'write_ends_at_episode_end': (
        3, 2, 'write', [(5, 1.0)], [
            item([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 1, 1], [F, M, M], 10,
                 101),
            item([3, 4, 5], [3, 4, 5], [3, 4, 5], [1, 1, 1], [M, M, M], 30,
                 103),
            item([4, 5, 6], [4, 5, 0], [4, 5, 0], [1, 1, 0], [M, M, L], 40,
                 104),
        ]),
    'continue_crosses_episodes': (
        3, 2, 'continue', [(2, 0.0), (2, 0.0)], [
            item([1, 2, 3], [1, 2, 0], [1, 2, 0], [1, 0, 0], [F, M, L], 10,
                 101),
            item([3, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 0], [L, F, M], 0,
                 102),
        ]),
    'two_episodes_restart_counting': (
        2, 2, 'zero_pad', [(1, 0.0), (1, 0.0)], [
            item([1, 2], [1, 0], [1, 0], [0, 0], [F, L], 10, 101),
            item([1, 2], [1, 0], [1, 0], [0, 0], [F, L], 10, 101),
        ]),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_sequence_adder(case, make_client, read_all, env_spec):
  length, period, behavior, episodes, expected = CASES[case]
  sig = adders.SequenceAdder.signature(
      env_spec, length, extras_spec={'logp': np.float32(0)},
      core_state_spec=np.zeros(2, np.float32),
      end_of_episode_behavior=behavior)
  client = make_client({'seq': sig})
  adder = adders.SequenceAdder(client, 'seq', length, period, behavior,
                               actor_id=9)
  for n, last_discount in episodes:
    run_episode(adder, n, last_discount)
  adder.flush()
  items = read_all(client, 'seq')
  assert len(items) == len(expected)
  for got, want in zip(items, expected):
    for key, value in want.items():
      np.testing.assert_allclose(got[key], value, err_msg=f'{case}: {key}')
    assert got['actor_id'] == 9
    np.testing.assert_allclose(got['extras']['logp'], -np.asarray(want['action']))


def test_episode_adder(make_client, read_all, env_spec):
  sig = adders.EpisodeAdder.signature(
      env_spec, extras_spec={'logp': np.float32(0)},
      core_state_spec=np.zeros(2, np.float32))
  client = make_client({'ep': sig})
  adder = adders.EpisodeAdder(client, 'ep', max_sequence_length=10)
  run_episode(adder, 3, 1.0)
  run_episode(adder, 1, 0.0)
  adder.flush()
  first, second = read_all(client, 'ep')
  np.testing.assert_allclose(first['observation'], [1, 2, 3, 4])
  np.testing.assert_allclose(first['discount'], [1, 1, 1, 0])
  np.testing.assert_allclose(first['step_type'], [F, M, M, L])
  np.testing.assert_allclose(first['core_state'], [10, 10])
  np.testing.assert_allclose(second['observation'], [1, 2])
  assert first['policy_version'] == 101


def test_episode_too_long_is_explained(make_client, env_spec):
  client = make_client({'ep': adders.EpisodeAdder.signature(
      env_spec, extras_spec={'logp': np.float32(0)},
      core_state_spec=np.zeros(2, np.float32))})
  adder = adders.EpisodeAdder(client, 'ep', max_sequence_length=3)
  with pytest.raises(ValueError, match='max_sequence_length=3'):
    run_episode(adder, 5)


def test_add_before_add_first_says_what_to_do(make_client, env_spec):
  client = make_client({'seq': adders.SequenceAdder.signature(env_spec, 2)})
  adder = adders.SequenceAdder(client, 'seq', 2, 1)
  with pytest.raises(RuntimeError, match='add_first'):
    adder.add(np.int32(0), dm_env.transition(0.0, np.float32(0)))


def test_table_rejects_mismatched_item(make_client, env_spec):
  client = make_client({'seq': adders.SequenceAdder.signature(env_spec, 2)})
  adder = adders.SequenceAdder(client, 'seq', 2, 1)
  adder.add_first(dm_env.restart(np.float32(1)))
  with pytest.raises(ValueError, match='signature'):
    # int64 actions where the spec says int32.
    for _ in range(2):
      adder.add(np.int64(1), dm_env.transition(np.float32(0), np.float32(1)))


def test_unknown_end_behavior_lists_choices(make_client, env_spec):
  client = make_client({'seq': adders.SequenceAdder.signature(env_spec, 2)})
  with pytest.raises(ValueError, match='zero_pad'):
    adders.SequenceAdder(client, 'seq', 2, 1, 'pad')


def test_core_state_is_stored_once_per_item(tmp_path, env_spec):
  """Only the states that items reference reach the server (checkpoint size)."""
  import os  # pylint: disable=g-import-not-at-top
  import reverb  # pylint: disable=g-import-not-at-top
  state = np.random.default_rng(0).random(25_000).astype(np.float32)  # 100 kB
  sig = adders.SequenceAdder.signature(env_spec, 10, core_state_spec=state)
  server = reverb.Server(
      [reverb.Table.queue('seq', 100, signature=sig)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    adder = adders.SequenceAdder(client, 'seq', 10, 10)
    adder.add_first(dm_env.restart(np.float32(0)))
    for k in range(40):  # 4 items, 40 states appended.
      adder.add(np.int32(0), dm_env.transition(np.float32(0), np.float32(k)),
                core_state=state)
    adder.flush()
    assert client.server_info()['seq'].current_size == 4
    client.checkpoint()
    stored = sum(os.path.getsize(os.path.join(d, f))
                 for d, _, files in os.walk(tmp_path) for f in files)
    assert stored < 1.5e6, f'{stored} bytes: states stored per step (~4 MB)?'
  finally:
    server.stop()


# Acme's own sequence cases (`acme/adders/reverb/test_cases.py`,
# BASE_TEST_CASES_FOR_SEQUENCE_ADDER): (sequence_length, period, behaviour,
# actions in the episode, expected items as observation lists). Observation
# 0 is padding. Acme's episodes end in a termination, as `run_episode`'s.
ACME_CASES = {
    'PeriodOne': (3, 1, 'zero_pad', 4, [[1, 2, 3], [2, 3, 4], [3, 4, 5]]),
    'PeriodTwo': (3, 2, 'zero_pad', 4, [[1, 2, 3], [3, 4, 5]]),
    'EarlyTerminationPeriodOne': (3, 1, 'zero_pad', 2, [[1, 2, 3]]),
    'EarlyTerminationPeriodTwo': (3, 2, 'zero_pad', 2, [[1, 2, 3]]),
    'EarlyTerminationPaddingPeriodOne': (4, 1, 'zero_pad', 2,
                                         [[1, 2, 3, 0]]),
    'EarlyTerminationPaddingPeriodTwo': (4, 2, 'zero_pad', 2,
                                         [[1, 2, 3, 0]]),
    'EarlyTerminationNoPadding': (4, 1, 'truncate', 2, [[1, 2, 3]]),
    'LongEpisodePadding': (3, 3, 'zero_pad', 7,
                           [[1, 2, 3], [4, 5, 6], [7, 8, 0]]),
    'LongEpisodeNoPadding': (3, 3, 'truncate', 7,
                             [[1, 2, 3], [4, 5, 6], [7, 8]]),
    'EndBehavior_WRITE': (3, 2, 'write', 5,
                          [[1, 2, 3], [3, 4, 5], [4, 5, 6]]),
}


def reference_items(length, period, behavior, num_actions):
  """Acme's rules written out plainly, as observation lists: the episode is
  steps 1..L (L = num_actions + 1; step L is the final observation)."""
  steps = num_actions + 1
  windows = [list(range(end - length + 1, end + 1))
             for end in range(length, steps)            # not the final step
             if (end - length) % period == 0]
  if steps <= length:
    delta = length - steps
  else:
    delta = (-(steps - length)) % period
  if behavior == 'write':
    if steps >= length:
      windows.append(list(range(steps - length + 1, steps + 1)))
  elif behavior == 'truncate':
    windows.append(list(range(steps - (length - delta) + 1, steps + 1)))
  else:  # zero_pad
    padded = list(range(1, steps + 1)) + [0] * delta
    windows.append(padded[-length:])
  return windows


def _observations(make_client, read_all, env_spec, length, period, behavior,
                  num_actions):
  sig = adders.SequenceAdder.signature(
      env_spec, length, extras_spec={'logp': np.float32(0)},
      core_state_spec=np.zeros(2, np.float32),
      end_of_episode_behavior=behavior)
  client = make_client({'seq': sig})
  adder = adders.SequenceAdder(client, 'seq', length, period, behavior)
  run_episode(adder, num_actions)
  adder.flush()
  return [list(np.asarray(i['observation']).astype(int))
          for i in read_all(client, 'seq')]


@pytest.mark.parametrize('case', sorted(ACME_CASES))
def test_acme_sequence_cases(case, make_client, read_all, env_spec):
  length, period, behavior, num_actions, expected = ACME_CASES[case]
  assert reference_items(length, period, behavior, num_actions) == expected
  assert _observations(make_client, read_all, env_spec, length, period,
                       behavior, num_actions) == expected


@pytest.mark.parametrize('behavior', ['zero_pad', 'truncate', 'write'])
@pytest.mark.parametrize('length', [1, 2, 3, 4])
def test_every_period_and_episode_length_matches_acme(
    behavior, length, make_client, read_all, env_spec):
  # Periods 1..length; episodes shorter than, equal to and longer than the
  # sequence (L = actions + 1 steps).
  for period in range(1, length + 1):
    for num_actions in range(1, 2 * length + 3):
      expected = reference_items(length, period, behavior, num_actions)
      got = _observations(make_client, read_all, env_spec, length, period,
                          behavior, num_actions)
      assert got == expected, (length, period, behavior, num_actions)
