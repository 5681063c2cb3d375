"""A reaper: the launcher's death (even SIGKILL) ends every process it left.

`start_reaper()` starts this file as a small process (standard library only)
in a session of its own, holding a pipe from the launcher. Every second it
records the launcher's descendants started after it (Ray's GCS, raylet, dashboard and
runtime-env agents, the node processes) with their start times. When the
pipe closes without a `release` (the launcher died: SIGKILL, the OOM
killer), it SIGKILLs every recorded process still alive, and their
descendants. After a `release` (the launcher shut Ray down itself) it exits
without killing anything. A pid reused by an unrelated process is never
touched: its start time differs.
"""

import os
import select
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

_SNAPSHOT_SECS = 1.0
_KILL_ROUNDS_SECS = 3.0


def _stat(pid: int) -> Optional[tuple]:
  """(ppid, start time) of `pid`, or None if it is gone (or a zombie)."""
  try:
    with open(f'/proc/{pid}/stat', 'rb') as f:
      data = f.read()
  except OSError:
    return None
  fields = data[data.rindex(b')') + 2:].split()
  if fields[0] == b'Z':
    return None
  return int(fields[1]), int(fields[19])


def _processes() -> Dict[int, tuple]:
  table = {}
  for name in os.listdir('/proc'):
    if name.isdigit():
      stat = _stat(int(name))
      if stat is not None:
        table[int(name)] = stat
  return table


def _descendants(roots: List[int], table: Dict[int, tuple]) -> Dict[int, int]:
  """pid -> start time of every descendant of `roots` in `table`."""
  children: Dict[int, List[int]] = {}
  for pid, (ppid, _) in table.items():
    children.setdefault(ppid, []).append(pid)
  found = {}
  stack = list(roots)
  while stack:
    for child in children.get(stack.pop(), []):
      if child not in found and child != os.getpid():
        found[child] = table[child][1]
        stack.append(child)
  return found


def _kill(recorded: Dict[int, int]) -> int:
  """SIGKILLs the recorded processes still alive (same start time) and
  their descendants, until none is left (a few rounds)."""
  killed = 0
  deadline = time.monotonic() + _KILL_ROUNDS_SECS
  while time.monotonic() < deadline:
    table = _processes()
    alive = [p for p, start in recorded.items()
             if p in table and table[p][1] == start]
    targets = dict(_descendants(alive, table))
    targets.update({p: recorded[p] for p in alive})
    recorded.update(targets)
    if not targets:
      break
    for pid in targets:
      try:
        os.kill(pid, signal.SIGKILL)
        killed += 1
      except OSError:
        pass
    time.sleep(0.1)
  return killed


def _main(launcher_pid: int) -> None:
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # The launcher handles it.
  # Only processes started after the reaper (by the launch it guards).
  born_after = _stat(os.getpid())[1]
  launcher = _stat(launcher_pid)
  launcher_start = launcher[1] if launcher else None
  recorded: Dict[int, int] = {}
  released = False
  stdin = sys.stdin.buffer
  while True:
    now = _stat(launcher_pid)
    if now is None or now[1] != launcher_start:
      break  # Gone (also when a forked child still holds the pipe open).
    recorded.update({
        pid: start for pid, start in
        _descendants([launcher_pid], _processes()).items()
        if start >= born_after})
    ready, _, _ = select.select([stdin], [], [], _SNAPSHOT_SECS)
    if ready:
      line = stdin.readline()
      if line.strip() == b'release':
        released = True
      if not line or released:
        break
  if released:
    return  # Ray was shut down by the launcher; nothing is left to reap.
  killed = _kill(recorded)
  if killed:
    try:
      sys.stderr.write(f'[repertory.launch reaper] the launcher (pid '
                       f'{launcher_pid}) died; killed {killed} processes it '
                       'left.\n')
    except OSError:
      pass


class Reaper:
  """The launcher's end of the reaper (see the module docstring)."""

  def __init__(self):
    self._proc = subprocess.Popen(
        [sys.executable, '-S', '-u', os.path.abspath(__file__),
         str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        start_new_session=True, close_fds=True)

  @property
  def pid(self) -> int:
    return self._proc.pid

  def release(self, timeout: float = 10.0) -> None:
    """The launcher shut down what it started: the reaper exits."""
    try:
      self._proc.stdin.write(b'release\n')
      self._proc.stdin.close()
    except OSError:
      pass
    try:
      self._proc.wait(timeout)
    except subprocess.TimeoutExpired:
      self._proc.kill()
      self._proc.wait()


def start_reaper(unused_session_dir: Optional[str] = None) -> Reaper:
  """Starts a reaper of this process's descendants."""
  return Reaper()


if __name__ == '__main__':
  _main(int(sys.argv[1]))
