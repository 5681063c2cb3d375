"""A consumer asks several producers for work, through futures, then stops
the program.

Launchpad's consumer_producers example, written for repertory (only the
import differs).

  python examples/launchpad/consumer_producers.py --lp_launch_type=local_mp
"""

from typing import List

from absl import app
from absl import flags
from absl import logging

import repertory.launch as lp  # In Launchpad: import launchpad as lp

_NUM_PRODUCERS = flags.DEFINE_integer('num_producers', 2,
                                      'How many producers to start.')


class Consumer:
  """Calls every producer once per step, concurrently."""

  def __init__(self, producers: List[lp.CourierClient]) -> None:
    self._producers = producers
    self.results = []

  def run(self) -> None:
    for _ in range(10):
      self.step()
    print(f'consumer: {len(self.results)} steps, last {self.results[-1]}',
          flush=True)
    # Returning would end only this node; stop() ends the whole program.
    lp.stop()

  def step(self) -> List[int]:
    futures = [producer.futures.work(context)
               for context, producer in enumerate(self._producers)]
    results = [future.result() for future in futures]
    logging.info('Results: %s', results)
    self.results.append(results)
    return results


class Producer:
  """Stateless, so its work() may run in several threads at once."""

  def work(self, context: int) -> int:
    return context


def make_program(num_producers: int) -> lp.Program:
  program = lp.Program('consumer_producers')
  with program.group('producer'):
    producers = [program.add_node(lp.CourierNode(Producer))
                 for _ in range(num_producers)]
  program.add_node(lp.CourierNode(Consumer, producers=producers),
                   label='consumer')
  return program


def main(_):
  lp.launch(make_program(num_producers=_NUM_PRODUCERS.value))


if __name__ == '__main__':
  app.run(main)
