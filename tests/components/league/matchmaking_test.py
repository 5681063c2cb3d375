"""AlphaStar's main-agent matchmaking (`alphastar`): the sampled
frequencies against probabilities worked out by hand from the paper's
rule (50 % PFSP over the league, 15 % verification, 35 % self-play)."""

import collections

import numpy as np
import pytest

from repertory.components.league import matchmaking


@pytest.mark.parametrize('win_rates, kept', [
    ([], 0), ([0.4], 0),
    ([0.9, 0.8, 0.6], 0),        # Each newer snapshot harder: none forgotten.
    ([0.5, 0.8, 0.6], 2),        # 0.5 -> 0.8 rises: the run is (0.8, 0.6).
    ([0.3, 0.6, 0.9, 0.95], 4),  # Rising to the newest: all count.
    ([0.3, 0.6, 0.9, 0.9], 3),   # A tie is not a rise: the run is (0.9, 0.9).
])
def test_the_monotonic_suffix_is_left_out(win_rates, kept):
  assert matchmaking.before_monotonic_suffix(win_rates) == kept


def _frequencies(roles, win_rates, draws=40_000):
  rng = np.random.default_rng(0)
  counts = collections.Counter(
      matchmaking.alphastar_main(roles, np.array(win_rates), rng)
      for _ in range(draws))
  return {k: v / draws for k, v in counts.items()}


def test_an_exploiter_it_loses_to_takes_the_verification_share():
  # PFSP (1 - x)^2 over all: 0.01, 0.64, 0.25, 0.04 of 0.94. Verification:
  # the exploiter (0.2 < 0.3) always.
  got = _frequencies(['main', 'exploiter', 'main', 'main'],
                     [0.9, 0.2, 0.5, 0.8])
  want = {0: 0.5 * 0.01 / 0.94, 1: 0.5 * 0.64 / 0.94 + 0.15,
          2: 0.5 * 0.25 / 0.94, 3: 0.5 * 0.04 / 0.94, None: 0.35}
  assert set(got) == set(want)
  for k, p in want.items():
    assert got[k] == pytest.approx(p, abs=0.01), k


def test_forgotten_own_snapshots_when_no_exploiter_beats_it():
  # The exploiter is beaten (0.6 >= 0.3). Own snapshots 0.9, 0.5, 0.8: the
  # rise 0.5 -> 0.8 keeps all three, and 0.5 < 0.7: PFSP over them,
  # 0.01, 0.25, 0.04 of 0.30.
  got = _frequencies(['main', 'exploiter', 'main', 'main'],
                     [0.9, 0.6, 0.5, 0.8])
  over_all = np.array([0.01, 0.16, 0.25, 0.04]) / 0.46
  want = {0: 0.5 * over_all[0] + 0.15 * 0.01 / 0.3, 1: 0.5 * over_all[1],
          2: 0.5 * over_all[2] + 0.15 * 0.25 / 0.3,
          3: 0.5 * over_all[3] + 0.15 * 0.04 / 0.3, None: 0.35}
  for k, p in want.items():
    assert got[k] == pytest.approx(p, abs=0.01), k


def test_nothing_to_verify_means_self_play():
  # Newer snapshots harder (0.9 then 0.8): nothing forgotten, no exploiter.
  got = _frequencies(['main', 'main'], [0.9, 0.8])
  assert got[None] == pytest.approx(0.5, abs=0.01)
  assert got[0] == pytest.approx(0.5 * 0.2, abs=0.01)
  assert got[1] == pytest.approx(0.5 * 0.8, abs=0.01)


def test_unknown_rule_names_the_known_ones():
  with pytest.raises(ValueError, match='alphastar, latest, pfsp'):
    matchmaking.get('nash')
