"""Prints rows as 'key = value | key = value'."""

from typing import Callable, Optional

from absl import logging

from repertory.components.loggers import base


def _format(value) -> str:
  value = base.summarize(value)  # A distribution prints as its mean.
  if isinstance(value, float):
    return f'{value:.4g}'
  return str(value)


class TerminalLogger(base.Logger):
  """Logs rows through absl logging (or `print_fn`)."""

  def __init__(self, label: str = '',
               print_fn: Optional[Callable[[str], None]] = None):
    self._label = f'[{label}] ' if label else ''
    self._print = print_fn or logging.info

  def write(self, values: base.LoggingData) -> None:
    self._print(self._label + ' | '.join(
        f'{k} = {_format(v)}' for k, v in sorted(values.items())))
