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

`register(name, rule)` adds a rule; `get(name)` refuses unknown names in
one line naming the known ones.
"""

from typing import Callable, Dict

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


def get(name: str) -> Rule:
  if name not in RULES:
    raise ValueError(f'Unknown matchmaking rule {name!r}; known: '
                     f'{", ".join(sorted(RULES))}.')
  return RULES[name]
