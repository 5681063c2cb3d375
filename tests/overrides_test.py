"""Tests of `--config.<field>=<value>` overrides."""

import dataclasses
from typing import Optional, Tuple

import pytest

from repertory import overrides


@dataclasses.dataclass
class _Config:
  learning_rate: float = 1e-3
  unroll_length: int = 20
  use_lstm: bool = False
  hidden_sizes: Tuple[int, ...] = (64, 64)
  max_policy_lag: Optional[int] = None
  name: str = 'x'

  def __post_init__(self):
    if self.unroll_length < 1:
      raise ValueError(f'unroll_length must be >= 1, got {self.unroll_length}')


def test_parses_each_type():
  config = overrides.apply(_Config(), {
      'learning_rate': '3e-4', 'unroll_length': '40', 'use_lstm': 'true',
      'hidden_sizes': '128,128,32', 'max_policy_lag': '5', 'name': 'y'})
  assert config == _Config(3e-4, 40, True, (128, 128, 32), 5, 'y')


def test_optional_none():
  config = overrides.apply(_Config(max_policy_lag=3), {'max_policy_lag': 'none'})
  assert config.max_policy_lag is None


def test_unknown_field_names_the_choices():
  with pytest.raises(ValueError, match=r"'learnig_rate'.*learning_rate"):
    overrides.apply(_Config(), {'learnig_rate': '1'})


@pytest.mark.parametrize('field,text', [('unroll_length', '2.5'),
                                        ('use_lstm', 'maybe'),
                                        ('learning_rate', 'fast')])
def test_bad_values_are_refused(field, text):
  with pytest.raises(ValueError, match=field):
    overrides.apply(_Config(), {field: text})


def test_validation_of_the_dataclass_runs():
  with pytest.raises(ValueError, match='unroll_length'):
    overrides.apply(_Config(), {'unroll_length': '0'})


def test_agents_register_and_unknown_agent_names_the_choices():
  from repertory import agents  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match=r"'nope'.*impala"):
    agents.get('nope')
  agents.register('my_agent', 'repertory.agents.impala')
  try:
    assert agents.get('my_agent').make_program is not None
    with pytest.raises(ValueError, match='already registered'):
      agents.register('my_agent', 'somewhere.else')
  finally:
    del agents.AGENTS['my_agent']
