"""Benchmark children that end with the benchmark.

A benchmark starts the command it measures in a session of its own (so
that it can end the command's whole process tree with one `killpg`), which
also keeps the terminal's Ctrl-C and a `kill` of the benchmark from
reaching it: the command would run on, unwatched, taking the cores from
whatever runs next. `start` asks Linux to send the child SIGTERM when the
benchmark dies, however it dies (`PR_SET_PDEATHSIG`; a repertory program
stops on SIGTERM as on Ctrl-C, and its launcher's reaper ends Ray's
processes). Elsewhere the child is started as before.
"""

import ctypes
import functools
import os
import signal
import subprocess
import sys
from typing import Any, Sequence

_PR_SET_PDEATHSIG = 1


def _terminate_with_parent(parent: int) -> None:
  """In the child, before exec: SIGTERM when the parent thread exits (also
  if it exited before this call)."""
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG,
                                          int(signal.SIGTERM))
  if os.getppid() != parent:
    os.kill(os.getpid(), signal.SIGTERM)


def start(command: Sequence[str], **kwargs: Any) -> subprocess.Popen:
  """`subprocess.Popen(command, start_new_session=True, **kwargs)`, the
  child sent SIGTERM when this process (the calling thread) dies."""
  if sys.platform.startswith('linux'):
    kwargs['preexec_fn'] = functools.partial(_terminate_with_parent,
                                             os.getpid())
  return subprocess.Popen(command, start_new_session=True, **kwargs)
