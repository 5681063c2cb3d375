"""Clients call a server method that runs batched: concurrent calls are
stacked into one call (central inference in Python).

Launchpad's batching example, written for repertory (the import and a longer
batching timeout differ): the handler is wrapped in `__init__`, as Launchpad
documents.

  python examples/launchpad/batching.py --lp_launch_type=local_mp
"""

import datetime

from absl import app
from absl import flags
from absl import logging
import numpy as np

import repertory.launch as lp  # In Launchpad: import launchpad as lp

_NUM_CLIENTS = flags.DEFINE_integer('num_clients', 2, 'How many clients.')


class Client:
  """Calls the server's batched method ten times, then stops the program."""

  def __init__(self, client_id: int, server: lp.CourierClient) -> None:
    self._client_id = client_id
    self._server = server

  def run(self) -> None:
    for x in range(self._client_id, self._client_id + 10):
      result = self._server.compute([x, x + 1])
      logging.info('Result: %s', result)
    print(f'client {self._client_id}: last result {result.tolist()}',
          flush=True)
    lp.stop()


class Server:
  """Keeps the running sum of every batch it was called with."""

  def __init__(self, batch_size: int) -> None:
    self._sum = None
    # Every batch holds one call of each client (they call in lockstep): a
    # timeout that never expires first, so that a busy machine cannot split
    # a batch (a batch of 1 sums to a shape of its own).
    self.compute = lp.batched_handler(
        batch_size=batch_size, timeout=datetime.timedelta(seconds=60))(
            self.compute)

  def compute(self, values):
    result = np.sum(values, axis=0)
    if self._sum is None:
      self._sum = result
    else:
      self._sum += result
    return np.tile(self._sum, (len(values), 1))


def make_program() -> lp.Program:
  program = lp.Program('batching')
  batch_size = _NUM_CLIENTS.value
  server = program.add_node(lp.CourierNode(Server, batch_size), label='server')
  with program.group('clients'):
    for client_id in range(_NUM_CLIENTS.value):
      program.add_node(lp.CourierNode(Client, client_id, server))
  return program


def main(argv):
  if len(argv) > 1:
    raise app.UsageError('Too many command-line arguments.')
  lp.launch(make_program())


if __name__ == '__main__':
  app.run(main)
