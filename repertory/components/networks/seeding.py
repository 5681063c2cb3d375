"""Seeded network construction that other threads cannot disturb.

With `tf.random.set_seed(s)`, the initial weights of an eagerly built network
depend on the process-wide count of random ops created since; in `local_mt`
and `test_mt` every node shares one process, so another node building its
network meanwhile would change them. Build under `seeded(seed)`:

    with networks.seeded(experiment.seed):
      network = make_network(spec)
"""

import contextlib
import threading
from typing import Iterator

import tensorflow as tf

_LOCK = threading.RLock()


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
  """Sets TensorFlow's global seed to `seed` and holds a process-wide lock,
  so that the random ops created inside get the same seeds every time."""
  with _LOCK:
    tf.random.set_seed(seed)
    yield
