"""Launchpad's examples (examples/launchpad/, `import repertory.launch as lp`
their only change) run under test_mt, local_mt and local_mp.

test_mt launches their `make_program()` in this process, as Launchpad's own
tests do; local_mt and local_mp run the scripts from the command line with
--lp_launch_type.
"""

import glob
import os
import re
import subprocess
import sys

from absl import flags
from absl.testing import absltest
from absl.testing import parameterized

import repertory.launch as lp
from repertory import testing

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                        'examples', 'launchpad')


def load_example(name: str):
  """examples/launchpad/<name>.py as a module (once: it defines flags)."""
  return testing.import_script(os.path.join(EXAMPLES, f'{name}.py'),
                               f'launchpad_example_{name}')


def run_example(name: str, launch_type: str) -> str:
  """Runs examples/launchpad/<name>.py; returns its output and node logs."""
  result = subprocess.run(
      [sys.executable, os.path.join(EXAMPLES, f'{name}.py'),
       f'--lp_launch_type={launch_type}', '--lp_termination_notice_secs=1'],
      capture_output=True, text=True, timeout=280)
  output = result.stdout + result.stderr
  assert result.returncode == 0, output
  for logdir in re.findall(r'node logs in (\S+)', output):
    for path in sorted(glob.glob(os.path.join(logdir, '*.log'))):
      with open(path) as f:
        output += f'\n--- {path}\n' + f.read()
  return output


class ExamplesTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    if not flags.FLAGS.is_parsed():  # make_program() reads the examples' flags.
      flags.FLAGS.mark_as_parsed()

  @parameterized.parameters('hello_world', 'consumer_producers', 'batching',
                            'program_wait')
  def test_in_test_mt(self, name):
    example = load_example(name)
    program = (example.make_program(num_producers=2)
               if name == 'consumer_producers' else example.make_program())
    waiter = lp.launch(program, launch_type='test_mt', test_case=self,
                               termination_notice_secs=1)
    self.assertTrue(waiter.wait(timeout=120))

  @parameterized.named_parameters(('_local_mt', 'local_mt'),
                                  ('_local_mp', 'local_mp'))
  def test_hello_world(self, launch_type):
    self.assertIn('Hello World!!!', run_example('hello_world', launch_type))

  @parameterized.named_parameters(('_local_mt', 'local_mt'),
                                  ('_local_mp', 'local_mp'))
  def test_consumer_producers(self, launch_type):
    output = run_example('consumer_producers', launch_type)
    self.assertIn('consumer: 10 steps, last [0, 1]', output)

  @parameterized.named_parameters(('_local_mt', 'local_mt'),
                                  ('_local_mp', 'local_mp'))
  def test_batching(self, launch_type):
    output = run_example('batching', launch_type)
    # Client 0 sends [x, x + 1] for x in 0..9, client 1 for x in 1..10; the
    # server answers each call of a batch with the running sum of every
    # call so far, one row per call.
    self.assertCountEqual(
        re.findall(r'client (\d): last result \[\d+, \d+\]', output),
        ['0', '1'])
    answers = re.findall(r'Result: \[ *(\d+) +(\d+)\]', output)
    self.assertLen(answers, 20, output)
    # Every call was summed exactly once: the last answer is the total.
    self.assertEqual(max((int(a), int(b)) for a, b in answers), (100, 120))
    # Calls were batched: the running sum grows with every batch, so a row
    # that answered two calls came from one batch of both clients' calls.
    # (Not necessarily every batch: with Launchpad's 200 ms batch timeout a
    # busy machine can split one.)
    self.assertLess(len(set(answers)), len(answers), output)

  @parameterized.named_parameters(('_local_mt', 'local_mt'),
                                  ('_local_mp', 'local_mp'))
  def test_program_wait(self, launch_type):
    output = run_example('program_wait', launch_type)
    self.assertEqual(output.count('Program finished.'), 3)
    self.assertIn('Clean termination of _sleep node', output)
    self.assertIn('Clean termination of _stop_event node', output)


class ConsumerProducersTest(absltest.TestCase):
  """Launchpad's examples/consumer_producers/launch_test.py, restated."""

  def test_consumer_steps(self):
    consumer_producers = load_example('consumer_producers')
    program = consumer_producers.make_program(num_producers=2)
    (consumer_node,) = program.groups['consumer']
    consumer_node.disable_run()
    lp.launch(program, launch_type='test_mt', test_case=self)
    consumer = consumer_node.create_handle().dereference()
    for _ in range(10):
      self.assertEqual(consumer.step(), [0, 1])


if __name__ == '__main__':
  absltest.main()
