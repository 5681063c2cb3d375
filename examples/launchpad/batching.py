"""Clients call a server method that runs batched: concurrent calls are
stacked into one call (central inference in Python).

Launchpad's batching example, written for repertory: only the import differs
(and a line printed at the end, for the tests). The handler is wrapped in
`__init__` with Launchpad's default batch timeout (200 ms), as Launchpad
documents; the clients' first calls come together because no node's run()
starts before every node of the program is built.

  python examples/launchpad/batching.py --lp_launch_type=local_mp
"""

import time

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
    time.sleep(5)
    lp.stop()


class Server:
  """Keeps the running sum of every batch it was called with."""

  def __init__(self, batch_size: int) -> None:
    self._sum = None
    self.compute = lp.batched_handler(batch_size=batch_size)(self.compute)

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
  # Launchpad sizes its Courier server's threads to the batch (repertory
  # accepts the option and has no such limit).
  server = program.add_node(
      lp.CourierNode(
          Server, batch_size, courier_kwargs={'thread_pool_size': batch_size}),
      label='server')
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
