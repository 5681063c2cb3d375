"""Shows a run's progress lines: a tqdm bar on an interactive terminal,
the plain lines otherwise.

The run monitor writes lines such as::

  [   12.3s] actor_steps=20480 [20.5% of 100000, ETA 0m48s] (1662/s) learner_steps=64 ...
  [   14.0s] evaluation at actor_steps=20000: return=0.450 over 20 episodes

and on a terminal::

   20%|████▏               | 20.5k/100k [00:12<00:48, 1.66kstep/s, learner_steps=64 return=0.45 lag=1.20]

`ProgressDisplay.show(line)` prints them as they are (to stdout), or, when
stderr is a terminal, moves a bar (percentage of the actor-step budget,
rate, ETA) to the line's `actor_steps` with the other figures beside it, and
prints the other lines (evaluations, results) above the bar; an evaluation
line moves the bar to its `actor_steps` too. The monitor writes a progress
line every few seconds and each time another 5% of the budget is spent::

  display = ProgressDisplay(total=100_000, initial=resumed_steps)
  for line in lines:
    display.show(line)
  display.close()
"""

import re
import sys
from typing import IO, Optional

_PROGRESS = re.compile(r'^\[\s*[\d.]+s\] actor_steps=(\d+) \[[^]]*\] '
                       r'\(\d+/s\) (.*)$')
# Other lines that say where the run is (evaluations).
_AT_STEPS = re.compile(r'^\[\s*[\d.]+s\] evaluation at actor_steps=(\d+):')


def interactive(stream: Optional[IO[str]] = None) -> bool:
  """Whether `stream` (default stderr) is an interactive terminal."""
  stream = sys.stderr if stream is None else stream
  try:
    return stream.isatty()
  except (AttributeError, ValueError):  # Closed, or not a real stream.
    return False


def _figures(rest: str) -> str:
  """The figures after the rate, kept short for the bar: 'learner_steps=64
  return=0.45 lag=1.20' (the names as in the line, some shortened)."""
  rest = re.sub(r'return\(last \d+\)=', 'return=', rest)
  rest = rest.replace('policy_lag=', 'lag=')
  return ' '.join(p for p in rest.split()
                  if not p.startswith(('episodes=', 'dropped=0')))


class ProgressDisplay:
  """Shows progress lines on the terminal (see the module docstring).

  Args:
    total: the actor-step budget (100% of the bar).
    initial: the actor steps already taken (a resumed run).
    bar: draw a tqdm bar (default: when stderr is an interactive terminal);
      otherwise the lines are printed as they are.
    out: where plain lines go (default stdout).
    bar_stream: where the bar is drawn (default stderr).
  """

  def __init__(self, total: int, initial: int = 0, bar: Optional[bool] = None,
               out: Optional[IO[str]] = None,
               bar_stream: Optional[IO[str]] = None):
    self._out = out
    self._bar = None
    if bar if bar is not None else interactive(bar_stream):
      import tqdm  # pylint: disable=g-import-not-at-top
      self._bar = tqdm.tqdm(
          total=int(total), initial=min(int(initial), int(total)),
          unit='step', unit_scale=True, dynamic_ncols=True, smoothing=0.3,
          file=bar_stream if bar_stream is not None else sys.stderr)

  @property
  def has_bar(self) -> bool:
    return self._bar is not None

  def show(self, line: str) -> None:
    """Shows one line of the monitor (without its newline)."""
    line = line.rstrip('\n')
    if self._bar is None:
      out = self._out if self._out is not None else sys.stdout
      out.write(line + '\n')
      out.flush()
      return
    match = _PROGRESS.match(line)
    if match is None:
      self._bar.write(line, file=self._out)
      at = _AT_STEPS.match(line)
      if at is not None:
        self._move(int(at.group(1)))
        self._bar.refresh()
      return
    self._move(int(match.group(1)))
    self._bar.set_postfix_str(_figures(match.group(2)), refresh=True)

  def _move(self, steps: int) -> None:
    """Puts the bar at `steps` (never back); tqdm's own `update` skips
    redrawing between its adaptive `miniters`, so `n` is set directly."""
    steps = min(steps, self._bar.total)
    if steps > self._bar.n:
      self._bar.n = steps
      self._bar.last_print_n = steps

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
      self._bar = None
