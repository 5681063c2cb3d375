"""launch.run_until_stop: a node's step loop, quiet about errors at stop."""

import pytest

from repertory import launch


class Stepper:
  """Steps; stops the program at step `stop_at`; raises at step `raise_at`."""

  def __init__(self, stop_at=None, raise_at=None):
    self.steps = 0
    self._stop_at, self._raise_at = stop_at, raise_at

  def step(self):
    self.steps += 1
    if self.steps == self._stop_at:
      launch.stop()
      launch.wait_for_stop(timeout=30)
    if self.steps == self._raise_at:
      raise ConnectionError(f'server gone at step {self.steps}')

  def run(self):
    launch.run_until_stop(self.step)


def _launch(stepper_kwargs):
  program = launch.Program('steps')
  with program.group('stepper'):
    program.add_node(launch.PyClassNode(Stepper, **stepper_kwargs))
  return launch.launch(program, launch_type='test_mt',
                       termination_notice_secs=5)


def test_the_loop_ends_when_the_program_stops():
  launched = _launch(dict(stop_at=3))
  assert launched.wait(timeout=60)


def test_an_error_while_stopping_is_quiet():
  launched = _launch(dict(stop_at=3, raise_at=3))
  assert launched.wait(timeout=60)  # No NodeError.


def test_an_error_before_the_stop_fails_the_node():
  with pytest.raises(launch.NodeError, match='server gone at step 2'):
    launched = _launch(dict(raise_at=2))
    launched.wait(timeout=60)
