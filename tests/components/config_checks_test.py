"""config_checks: the range checks agents' Configs run, and a config base
(PrioritizedReplayConfig) whose subclass adds fields and checks."""

import dataclasses
from typing import ClassVar, Optional, Tuple

import pytest

from repertory.components import config_checks
from repertory.agents.prioritized_replay import config as replay_config


@dataclasses.dataclass
class Settings:
  steps: int = 1
  rate: float = 0.1
  clip: Optional[float] = None
  gamma: float = 0.9
  cost: float = 0.0
  widths: Tuple[int, ...] = (4, 4)

  def __post_init__(self):
    config_checks.check_ranges(
        self, 'Toy Config: ', at_least_one=('steps',), above_zero=('rate',),
        above_zero_or_none=('clip',), unit=('gamma',),
        at_least_zero=('cost',))
    self.widths = config_checks.widths(self, 'Toy Config: ', 'widths')


@pytest.mark.parametrize('field,value,message', [
    ('steps', 0, 'Toy Config: steps must be >= 1, got 0.'),
    ('rate', 0.0, 'Toy Config: rate must be > 0, got 0.0.'),
    ('clip', -1.0, r'Toy Config: clip must be > 0 or None \(off\), got -1.0.'),
    ('gamma', 1.5, r'Toy Config: gamma must be in \[0, 1\], got 1.5.'),
    ('cost', -0.5, 'Toy Config: cost must be >= 0, got -0.5.'),
    ('widths', (), r'Toy Config: widths must be positive widths, got \(\).'),
    ('widths', (3, 0),
     r'Toy Config: widths must be positive widths, got \(3, 0\).'),
])
def test_an_out_of_range_field_is_named_with_its_value(field, value,
                                                       message):
  with pytest.raises(ValueError, match=f'^{message}$'):
    Settings(**{field: value})


def test_good_values_pass_and_widths_become_ints():
  settings = Settings(clip=0.5, gamma=1.0, widths=[8.0, 2])
  assert settings.widths == (8, 2)
  config_checks.require(settings, Settings, 'Toy')
  with pytest.raises(TypeError, match="make_program needs Toy's Config"):
    config_checks.require(object(), Settings, 'Toy')


@dataclasses.dataclass
class Recurrent(replay_config.PrioritizedReplayConfig):
  NAME: ClassVar[str] = 'Toy'
  _POSITIVE: ClassVar[Tuple[str, ...]] = ('lstm_size',)
  batch_size: int = 8
  lstm_size: int = 16


def test_a_replay_config_subclass_checks_its_own_fields_and_the_shared():
  config = Recurrent()
  assert config.batch_size == 8 and config.replay_size == 50_000
  with pytest.raises(ValueError, match=r'^Toy Config.lstm_size must be >= 1'):
    Recurrent(lstm_size=0)
  with pytest.raises(ValueError, match=r'^Toy Config.discount must be in'):
    Recurrent(discount=2.0)
  with pytest.raises(ValueError, match='min_replay_size=600 exceeds'):
    Recurrent(min_replay_size=600, replay_size=500)
  with pytest.raises(ValueError, match="initial_priority='x'; choose one"):
    Recurrent(initial_priority='x')
