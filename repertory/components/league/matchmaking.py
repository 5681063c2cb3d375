"""Matchmaking: which opponent a learning player meets next.

A rule is `rule(win_rates, rng) -> index` over the candidates (frozen
snapshots, oldest first), given the learner's win rate against each:

- `latest`: the newest snapshot (naive self-play when snapshots are taken
  often; the league also lets 'latest' mean the live policy itself),
- `uniform`: uniform over the pool (fictitious self-play; Heinrich et al.
  2015),
- `pfsp`: prioritized fictitious self-play (Vinyals et al. 2019, AlphaStar):
  candidate b with probability proportional to f(P[learner beats b]), with
  f_hard(x) = (1 - x)^2 (focus on the opponents it loses to),
- `pfsp_variance`: f_var(x) = x (1 - x) (opponents of similar strength).

A main-agent rule also sees each candidate's role and may answer None (the
live policy, self-play):

- `alphastar`: AlphaStar's mix for its main agents (`alphastar_main`).

`register(name, rule)` adds a rule; `get(name)` refuses unknown names in
one line naming the known ones.
"""

from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np

Rule = Callable[[np.ndarray, np.random.Generator], int]


def latest(win_rates: np.ndarray, rng: np.random.Generator) -> int:
  del rng
  return len(win_rates) - 1


def uniform(win_rates: np.ndarray, rng: np.random.Generator) -> int:
  return int(rng.integers(len(win_rates)))


def pfsp_weights(win_rates: np.ndarray, weighting: str = 'squared'
                 ) -> np.ndarray:
  """AlphaStar's PFSP probabilities from the learner's win rates."""
  x = np.asarray(win_rates, np.float64)
  if weighting == 'squared':
    weights = (1.0 - x) ** 2
  elif weighting == 'variance':
    weights = x * (1.0 - x)
  else:
    raise ValueError(f"PFSP weighting {weighting!r}: expected 'squared' or "
                     "'variance'.")
  total = weights.sum()
  if total <= 0:  # It beats (or, for variance, is decided against) all.
    return np.full(len(x), 1.0 / len(x))
  return weights / total


def pfsp(win_rates: np.ndarray, rng: np.random.Generator) -> int:
  return int(rng.choice(len(win_rates), p=pfsp_weights(win_rates)))


def pfsp_variance(win_rates: np.ndarray, rng: np.random.Generator) -> int:
  return int(rng.choice(len(win_rates),
                        p=pfsp_weights(win_rates, 'variance')))


def before_monotonic_suffix(win_rates: Sequence[float]) -> int:
  """How many of a learner's own snapshots (oldest first) may have been
  forgotten: the newest run of snapshots over which its win rate does not
  rise with recency (each at least as hard as the one before, as expected)
  is left out, and the snapshots before that run's first one are kept
  (0 when the whole history is such a run)."""
  for i in range(len(win_rates) - 1, 0, -1):
    if win_rates[i - 1] < win_rates[i]:
      return i + 1
  return 0


def alphastar_main(roles: Sequence[str], win_rates: np.ndarray,
                   rng: np.random.Generator) -> Optional[int]:
  """AlphaStar's main agent (Vinyals et al. 2019, supplementary
  pseudocode): an index into the candidates, or None for self-play.

  - 50 %: PFSP (squared) over every snapshot, to beat the whole league;
  - 15 %: verification: PFSP over the exploiters' snapshots when the learner
    wins less than 30 % against one of them, else over its own snapshots it
    has forgotten (`before_monotonic_suffix`) when it wins less than 70 % against
    one of those; with neither, self-play;
  - 35 %: self-play. (AlphaStar picks a checkpoint of the opponent main
    agent when it wins at most 30 % against it; with one main agent, which
    scores 0.5 against itself, that never happens.)

  Args:
    roles: each candidate's role ('main' or 'exploiter'), oldest first.
    win_rates: the learner's win rate against each candidate.
    rng: the sampler.
  """
  win_rates = np.asarray(win_rates, np.float64)
  coin = rng.random()
  if coin < 0.5:
    return int(rng.choice(len(win_rates), p=pfsp_weights(win_rates)))
  if coin < 0.65:
    exploiters = [i for i, r in enumerate(roles) if r == 'exploiter']
    own = [i for i, r in enumerate(roles) if r == 'main']
    own = own[:before_monotonic_suffix(win_rates[own])]
    for candidates, below in ((exploiters, 0.3), (own, 0.7)):
      rates = win_rates[candidates]
      if candidates and rates.min() < below:
        return candidates[int(rng.choice(len(candidates),
                                         p=pfsp_weights(rates)))]
  return None


# Rules that see roles: rule(roles, win_rates, rng) -> index or None.
MainRule = Callable[[Sequence[str], np.ndarray, np.random.Generator],
                    Optional[int]]
MAIN_RULES: Mapping[str, MainRule] = {'alphastar': alphastar_main}

RULES: Dict[str, Rule] = {
    'latest': latest,
    'uniform': uniform,
    'pfsp': pfsp,
    'pfsp_variance': pfsp_variance,
}


def register(name: str, rule: Rule) -> None:
  """Adds a matchmaking rule `rule(win_rates, rng) -> index`."""
  if name in RULES and RULES[name] is not rule:
    raise ValueError(f'Matchmaking rule {name!r} is already registered.')
  if not callable(rule):
    raise TypeError(f'A matchmaking rule must be callable, got {rule!r}.')
  RULES[name] = rule


def get(name: str) -> Callable[..., Optional[int]]:
  """The rule `name` (of `RULES` or `MAIN_RULES`)."""
  rules = {**RULES, **MAIN_RULES}
  if name not in rules:
    raise ValueError(f'Unknown matchmaking rule {name!r}; known: '
                     f'{", ".join(sorted(rules))}.')
  return rules[name]
