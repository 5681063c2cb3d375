"""Appends rows to a CSV file (one file per label)."""

import csv
import os
from typing import List, Optional

from absl import logging

from repertory.components.loggers import base


class CSVLogger(base.Logger):
  """Writes `<directory>/<label>.csv`; the header is the first row's keys.

  A distribution (a numeric array with at least one dimension) is written
  as its mean.

  A key first seen after the header was written widens the file: it is
  rewritten once with the new column (earlier rows leave it empty). An
  existing file (a resumed run) is appended to under its own header.
  """

  def __init__(self, directory: str, label: str = 'logs',
               flush_every: int = 1):
    os.makedirs(directory, exist_ok=True)
    self.path = os.path.join(directory, f'{label.replace("/", "_")}.csv')
    self._fields: Optional[List[str]] = None
    self._file = None
    self._writer = None
    self._flush_every = max(1, flush_every)
    self._rows = 0

  def _open(self, fields: List[str], rows=()) -> None:
    if self._file is not None:
      self._file.close()
    self._fields = fields
    self._file = open(self.path, 'w', newline='')
    self._writer = csv.DictWriter(self._file, fieldnames=fields)
    self._writer.writeheader()
    for row in rows:
      self._writer.writerow(row)

  def _append(self) -> bool:
    """Continues an existing file (resume): True if there was one."""
    if not os.path.exists(self.path) or not os.path.getsize(self.path):
      return False
    with open(self.path, newline='') as f:
      header = next(csv.reader(f), None)
    if not header:
      return False
    with open(self.path, 'rb') as f:
      f.seek(-1, os.SEEK_END)
      complete = f.read(1) == b'\n'
    self._fields = header
    self._file = open(self.path, 'a', newline='')
    if not complete:  # A process killed mid-row: end that row.
      self._file.write('\n')
    self._writer = csv.DictWriter(self._file, fieldnames=header)
    return True

  def write(self, values: base.LoggingData) -> None:
    row = {k: base.summarize(v) for k, v in values.items()}
    if self._fields is None and not self._append():
      self._open(sorted(row))
    elif not set(row) <= set(self._fields):
      new_fields = self._fields + sorted(set(row) - set(self._fields))
      logging.info('CSVLogger %s: new columns %s.', self.path,
                   new_fields[len(self._fields):])
      self._file.close()
      with open(self.path, newline='') as f:
        old_rows = list(csv.DictReader(f))
      self._open(new_fields, old_rows)
    self._writer.writerow(row)
    self._rows += 1
    if self._rows % self._flush_every == 0:
      self._file.flush()

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
      self._file = None
