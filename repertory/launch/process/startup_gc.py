"""Python's cyclic garbage collector paused while a process starts a program.

A node process imports most of what it will ever hold while its nodes are
built: TensorFlow alone is thousands of modules and hundreds of thousands
of objects that live as long as the process. The collector's passes,
triggered by allocation counts, scan all of them again and again while the
imports go on. `pause()` stops the collector; `resume()` moves every object
allocated so far into the permanent generation (`gc.freeze()`: never
scanned again) and starts the collector again, so that later passes skip
the imported objects too. The few unreachable objects among them stay in
memory.

    startup_gc.pause()     # a process that hosts nothing but the program
    ...                    # imports, the nodes built
    startup_gc.resume()    # idempotent; also after `max_seconds`

Paused by node processes of local_mp and ray (`ray_node`) and by the
`repertory.run` command line; resumed by `hosting.NodeHost` once every node
of the process is built, by the Ray launcher once its nodes' processes
are created, and by the command line at once when it runs a sweep (whose
trials are programs of their own). A process that hosts more than a
program (a test runner, a notebook) is left alone: its garbage would be
frozen too.
"""

import gc
import threading
from typing import Optional

# The longest pause: garbage made meanwhile is kept (frozen) at resume.
MAX_SECONDS = 30.0

_lock = threading.Lock()
_deadline: Optional[threading.Timer] = None


def pause(max_seconds: float = MAX_SECONDS) -> bool:
  """Stops the collector until `resume()`, at most `max_seconds`. Returns
  False and changes nothing if the collector is off (someone else turned
  it off) or paused already."""
  global _deadline
  if not max_seconds > 0:
    raise ValueError(f'max_seconds must be > 0, got {max_seconds!r}.')
  with _lock:
    if _deadline is not None or not gc.isenabled():
      return False
    gc.disable()
    _deadline = threading.Timer(max_seconds, resume)
    _deadline.daemon = True
    _deadline.name = 'startup-gc-deadline'
    _deadline.start()
    return True


def resume() -> None:
  """If `pause()` stopped the collector: freezes every object allocated so
  far and starts it again. Otherwise nothing."""
  global _deadline
  with _lock:
    if _deadline is None:
      return
    _deadline.cancel()
    _deadline = None
    gc.freeze()
    gc.enable()


def paused() -> bool:
  """Whether `pause()` stopped the collector and it has not resumed."""
  return _deadline is not None
