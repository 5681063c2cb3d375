"""The service's slots: one per open episode, at most `size` at once."""

import threading
from typing import Optional


class SlotPool:
  """Slot ids 0 .. size - 1; the lowest free one is taken first."""

  def __init__(self, size: int):
    self._free = list(range(size - 1, -1, -1))
    self._lock = threading.Lock()
    self.size = size

  def take(self) -> Optional[int]:
    with self._lock:
      if not self._free:
        return None
      self._free.sort(reverse=True)
      return self._free.pop()

  def give_back(self, slot: int) -> None:
    with self._lock:
      self._free.append(slot)

  def in_use(self) -> int:
    with self._lock:
      return self.size - len(self._free)
