"""Range checks for agents' `Config.__post_init__`: one clear `ValueError`
naming the field, its value and the allowed range (and `require`: the type
check of an agent's `make_program`).

    def __post_init__(self):
      config_checks.check_ranges(
          self, 'PPO Config: ', at_least_one=('unroll_length',),
          above_zero=('learning_rate',), unit=('discount',))
      self.hidden_sizes = config_checks.widths(self, 'PPO Config: ',
                                               'hidden_sizes')
"""

from typing import Any, Sequence, Tuple


def fail(config: Any, prefix: str, name: str, what: str) -> None:
  """Raises `ValueError('<prefix><name> must be <what>, got <value>.')`."""
  raise ValueError(f'{prefix}{name} must be {what}, got '
                   f'{getattr(config, name)!r}.')


def check_ranges(config: Any, prefix: str, *,
                 at_least_one: Sequence[str] = (),
                 above_zero: Sequence[str] = (),
                 above_zero_or_none: Sequence[str] = (),
                 unit: Sequence[str] = (),
                 at_least_zero: Sequence[str] = ()) -> None:
  """Checks fields of `config`: >= 1, > 0, > 0 or None (off), in [0, 1],
  >= 0; the first out of range raises (see `fail`)."""
  for name in at_least_one:
    if getattr(config, name) < 1:
      fail(config, prefix, name, '>= 1')
  for name in above_zero:
    if not getattr(config, name) > 0:
      fail(config, prefix, name, '> 0')
  for name in above_zero_or_none:
    value = getattr(config, name)
    if value is not None and not value > 0:
      fail(config, prefix, name, '> 0 or None (off)')
  for name in unit:
    if not 0.0 <= getattr(config, name) <= 1.0:
      fail(config, prefix, name, 'in [0, 1]')
  for name in at_least_zero:
    if getattr(config, name) < 0:
      fail(config, prefix, name, '>= 0')


def widths(config: Any, prefix: str, name: str) -> Tuple[int, ...]:
  """Field `name` (layer widths) as a tuple of ints; raises unless it is a
  non-empty sequence of positive widths."""
  value = getattr(config, name)
  if not value or any(int(w) < 1 for w in value):
    fail(config, prefix, name, 'positive widths')
  return tuple(int(w) for w in value)


def require(config: Any, config_type: type, agent: str) -> None:
  """Raises `TypeError` unless `config` is a `config_type` (an agent's
  `make_program` checks what it was given)."""
  if not isinstance(config, config_type):
    raise TypeError(f'make_program needs {agent}\'s Config, got {config!r}.')
