"""`make_logger`: the default fan-out to terminal, CSV and TensorBoard."""

import os
from typing import Callable, Optional

from repertory.components.loggers import base
from repertory.components.loggers import csv_logger
from repertory.components.loggers import tensorboard
from repertory.components.loggers import terminal


def make_logger(label: str,
                logdir: Optional[str] = None,
                time_delta: float = 1.0,
                steps_key: Optional[str] = None,
                use_csv: bool = True,
                use_tensorboard: bool = True,
                print_fn: Optional[Callable[[str], None]] = None
                ) -> base.Logger:
  """A logger writing `label/key` values to the terminal, CSV and TensorBoard.

  Args:
    label: the namespace, e.g. 'actor', 'learner', 'evaluator'.
    logdir: if set, also writes `<logdir>/csv/<label>.csv` and TensorBoard
      events under `<logdir>/tensorboard/<label>`.
    time_delta: the terminal prints at most one row every this many seconds
      (files get every row).
    steps_key: the key used as TensorBoard step (e.g. 'actor_steps').
    use_csv, use_tensorboard: switch the file sinks off.
    print_fn: terminal output function (default absl logging.info).
  """
  if not label or '/' in label:
    raise ValueError(f'label must be a non-empty name without "/", got '
                     f'{label!r} (e.g. "actor", "learner").')
  sinks = [base.TimeFilter(terminal.TerminalLogger(label, print_fn),
                           time_delta)]
  if logdir is not None:
    if use_csv:
      sinks.append(csv_logger.CSVLogger(os.path.join(logdir, 'csv'), label))
    if use_tensorboard:
      sinks.append(tensorboard.TensorBoardLogger(
          os.path.join(logdir, 'tensorboard', label), steps_key))
  return base.NamespacedLogger(base.Dispatcher(sinks), label)
