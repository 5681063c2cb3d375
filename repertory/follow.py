"""Following a run's files as they grow, from the process that launched it:
the monitor's progress lines (`progress.log`) and rows (`progress.csv`),
written in whichever process the monitor runs.

    follower = follow.Follower(logdir, show_line=print, on_row=rows.append)
    follower.start()
    ...                                   # the run
    follower.stop()                       # reads both files to their end
"""

import csv
import io
import os
import threading
from typing import Any, Callable, Dict, List, Optional

LOG = 'progress.log'
ROWS = 'progress.csv'


def _number(text: str) -> Any:
  if text == '':
    return None
  try:
    value = float(text)
  except ValueError:
    return text
  return int(value) if value.is_integer() and 'e' not in text.lower() and (
      '.' not in text) else value


def read_rows(path: str) -> List[Dict[str, Any]]:
  """The rows of a progress.csv, numbers as numbers (empty cells None)."""
  if not os.path.exists(path):
    return []
  with open(path, newline='') as f:
    text = f.read()
  if not text.endswith('\n'):  # A row being written: not yet.
    text = text[:text.rfind('\n') + 1]
  return [{k: _number(v or '') for k, v in row.items()}
          for row in csv.DictReader(io.StringIO(text))]


class Follower:
  """Shows each line appended to `progress.log` (`show_line`) and passes
  each row added to `progress.csv` to `on_row`, from when it was made:
  a resumed run's earlier lines and rows are not repeated."""

  def __init__(self, logdir: str, show_line: Callable[[str], None],
               on_row: Optional[Callable[[Dict[str, Any]], None]] = None,
               period: float = 0.5):
    self._log = os.path.join(logdir, LOG)
    self._rows = os.path.join(logdir, ROWS)
    self._show_line, self._on_row, self._period = show_line, on_row, period
    self._position = (os.path.getsize(self._log)
                      if os.path.exists(self._log) else 0)
    self._rows_seen = len(read_rows(self._rows)) if on_row else 0
    self._rows_stamp = None
    self._partial = ''
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, daemon=True,
                                    name='follow-progress')

  def start(self) -> None:
    self._thread.start()

  def stop(self, timeout: float = 10.0) -> None:
    """Reads both files to their end, then stops."""
    self._stop.set()
    self._thread.join(timeout=timeout)

  def _loop(self) -> None:
    while True:
      stopping = self._stop.wait(self._period)
      self._read_lines()
      if self._on_row is not None:
        self._read_rows()
      if stopping:
        return

  def _read_lines(self) -> None:
    if not os.path.exists(self._log):
      return
    with open(self._log) as f:
      f.seek(self._position)
      text = f.read()
      self._position = f.tell()
    *lines, self._partial = (self._partial + text).split('\n')
    for line in lines:
      self._show_line(line)

  def _read_rows(self) -> None:
    try:
      stat = os.stat(self._rows)
    except FileNotFoundError:
      return
    stamp = (stat.st_mtime_ns, stat.st_size)
    if stamp == self._rows_stamp:
      return
    self._rows_stamp = stamp
    rows = read_rows(self._rows)
    for row in rows[self._rows_seen:]:
      self._on_row(row)
    self._rows_seen = max(self._rows_seen, len(rows))
