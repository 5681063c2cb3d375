"""learners.remaining_fraction and LinearDecay against the plain formula."""

import pytest
import tensorflow as tf

from repertory.components import learners


def _plain(k, n, total):
  return max(0.0, 1.0 - (k + 1) * n / total)


@pytest.mark.parametrize('n,total', [(256, 100_000), (20, 60), (512, 512)])
def test_remaining_fraction_is_the_linear_formula(n, total):
  for k in range(0, total // n + 3):
    assert learners.remaining_fraction(k, n, total) == pytest.approx(
        _plain(k, n, total))
  assert learners.remaining_fraction(total // n + 2, n, total) == 0.0


def test_without_a_budget_the_value_is_a_plain_float():
  decay = learners.LinearDecay('learning_rate', 1e-3, 20, 0)
  assert decay.value == 1e-3 and not isinstance(decay.value, tf.Variable)
  assert decay.update(10**6) == {}
  assert decay.at(10**6) == 1e-3


def test_the_variable_follows_the_schedule_and_is_logged():
  decay = learners.LinearDecay('clip_epsilon', 0.2, 20, 60)
  assert isinstance(decay.value, tf.Variable)
  for k, fraction in enumerate([2 / 3, 1 / 3, 0.0, 0.0]):
    assert decay.update(k) == {'charts/clip_epsilon': pytest.approx(
        0.2 * fraction)}
    assert float(decay.value.numpy()) == pytest.approx(0.2 * fraction)
