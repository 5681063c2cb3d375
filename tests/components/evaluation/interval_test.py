"""Evaluation results carry their episode count, steps and a 95% interval
(Student's t, `components.statistics`, checked against scipy's);
`evaluate(max_steps=...)` plays whole episodes within its step share."""

import math

import numpy as np
import pytest
from scipy import stats

from repertory import environments
from repertory.components import statistics
from repertory.components.evaluation import evaluator


@pytest.mark.parametrize('df', list(range(1, 61)) + [100, 1000])
def test_t_quantile_matches_scipy(df):
  assert statistics.t_quantile_975(df) == pytest.approx(
      stats.t.ppf(0.975, df), abs=1e-5)


@pytest.mark.parametrize('n', [2, 5, 20, 200])
def test_the_interval_matches_scipy(n):
  values = list(np.random.default_rng(n).normal(0.3, 1.0, n))
  mean, low, high = statistics.mean_interval(values)
  want = stats.t.interval(0.95, n - 1, loc=np.mean(values),
                          scale=stats.sem(values))
  assert mean == pytest.approx(np.mean(values))
  assert (low, high) == pytest.approx(want, abs=1e-5)
  row = evaluator.EvaluationResult(values, [3] * n, policy_version=7,
                                   parts={'seat1': evaluator.EvaluationResult(
                                       values[:1], [2])}).as_dict('eval')
  assert row['eval_episodes'] == n and row['eval_policy_version'] == 7
  assert row['eval_return_ci95_low'] == low
  assert row['eval_steps'] == 3 * n + 2
  assert row['eval_seat1_episodes'] == 1
  assert np.isnan(row['eval_seat1_return_ci95_low'])  # One episode: none.


def test_fewer_than_two_values_have_no_interval():
  mean, low, high = statistics.mean_interval([0.7])
  assert mean == 0.7 and math.isnan(low) and math.isnan(high)
  assert all(math.isnan(v) for v in statistics.mean_interval([]))
  assert math.isnan(statistics.t_quantile_975(0))


class _Left:
  """Moves the paddle left in catch (a 9-step episode)."""
  version = 3

  def select_action(self, observation):
    return 0

  def observe_first(self, timestep):
    pass

  def observe(self, action, next_timestep):
    pass


def test_evaluate_plays_whole_episodes_within_its_steps():
  environment = environments.make('catch', seed=0)
  result = evaluator.evaluate(environment, _Left(), 100, max_steps=50)
  assert result.lengths == [9] * 5  # A sixth would end past 50 steps.
  assert result.policy_version == 3
  one = evaluator.evaluate(environment, _Left(), 100, max_steps=1)
  assert one.lengths == [9]  # The first always starts.
