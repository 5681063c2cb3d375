"""One BLAS thread in the processes that host a program's nodes.

NumPy's OpenBLAS splits a matrix product above a few thousand
multiply-adds over a thread per core and spins while it waits for them. An
actor's policy or an inference server's batch (tens to hundreds of
observations through a small MLP) is that size, so on a machine whose cores
the program's other processes keep busy each product waits for a busy core,
and on an idle one it burns a second core for little gain. Every process
that hosts nodes therefore runs NumPy's BLAS on one thread, as a node runs
TensorFlow's ops on few (`actors.limit_tf_threads`).

A BLAS thread count the user set in the environment (`OPENBLAS_NUM_THREADS`
or `MKL_NUM_THREADS`; for local_mp and ray also in a node group's `env` in
`local_resources`) is left as it is. `OMP_NUM_THREADS` is not read: Ray sets
it to 1 in its workers after NumPy, loaded in a prestarted worker, has
started OpenBLAS, which then no longer looks at it.
"""

import os
import threading
from typing import Optional

from absl import logging

USER_SETTINGS = ('OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')

_lock = threading.Lock()
_limited: Optional[bool] = None  # This process's result, once it is known.


def limit_blas_threads() -> bool:
  """Limits NumPy's BLAS (and any other loaded) to one thread in this
  process, unless one of `USER_SETTINGS` is set; returns whether it did.
  The first call decides; later ones (every node's thread calls it) wait
  for it and return its answer."""
  global _limited
  with _lock:
    if _limited is None:
      _limited = _limit()
    return _limited


def _limit() -> bool:
  if any(os.environ.get(name) for name in USER_SETTINGS):
    return False
  # pylint: disable=g-import-not-at-top,unused-import
  import numpy  # Loads its BLAS: threadpoolctl limits loaded libraries only.
  import threadpoolctl
  # pylint: enable=g-import-not-at-top,unused-import
  try:
    threadpoolctl.threadpool_limits(limits=1, user_api='blas')
  except Exception as e:  # pylint: disable=broad-except
    # A BLAS threadpoolctl cannot drive is slower, not wrong.
    logging.warning('Could not limit BLAS to one thread: %s', e)
    return False
  return True
