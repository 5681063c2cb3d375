"""Nodes that end cleanly when the program stops, one that never does, and
a launcher that waits for the program three times in a row.

Launchpad's program_wait example, written for repertory (only the import
differs). `_infinite_sleep` ignores the stop: it is killed at the end of the
termination notice (`--lp_termination_notice_secs`, default 10 s).

  python examples/launchpad/program_wait.py --lp_launch_type=local_mp
"""

import time

from absl import app
from absl import logging

import repertory.launch as lp  # In Launchpad: import launchpad as lp


def _sleep():
  while not lp.wait_for_stop(1):
    logging.info('Sleeping again...')
  logging.info('Clean termination of _sleep node')
  time.sleep(2)


def _wait_for_stop():
  lp.wait_for_stop()
  logging.info('Clean termination of _wait_for_stop node')
  time.sleep(2)


def _stop_event():
  lp.stop_event().wait()
  logging.info('Clean termination of _stop_event node')
  time.sleep(2)


def _infinite_sleep():
  # Never looks at the stop: ended by force when the notice runs out.
  time.sleep(1000000)


def _stop_program():
  time.sleep(4)
  lp.stop()


def make_program() -> lp.Program:
  program = lp.Program('program_wait')
  program.add_node(lp.CourierNode(_sleep), label='sleep')
  program.add_node(lp.CourierNode(_wait_for_stop), label='_wait_for_stop')
  program.add_node(lp.CourierNode(_stop_event), label='_stop_event')
  program.add_node(lp.CourierNode(_infinite_sleep), label='_infinite_sleep')
  program.add_node(lp.CourierNode(_stop_program), label='_stop_program')
  return program


def main(argv):
  if len(argv) > 1:
    raise app.UsageError('Too many command-line arguments.')
  for _ in range(3):
    controller = lp.launch(make_program())
    if not controller:
      logging.info('Waiting for program termination is not supported.')
      return
    controller.wait()
    print('Program finished.', flush=True)


if __name__ == '__main__':
  app.run(main)
