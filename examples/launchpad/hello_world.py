"""The smallest program: one node prints a line and the program ends.

Launchpad's hello_world example, written for repertory: the only Launchpad
difference is the import line.

  python examples/launchpad/hello_world.py --lp_launch_type=local_mp
"""

from absl import app

import repertory.launch as lp  # In Launchpad: import launchpad as lp


class HelloWorld:
  """Prints a greeting from its node, then returns (which ends the node)."""

  def run(self) -> None:
    print('Hello World!!!', flush=True)


def make_program() -> lp.Program:
  program = lp.Program('hello_world')
  program.add_node(lp.PyClassNode(HelloWorld), label='hello_printer')
  return program


def main(_):
  lp.launch(make_program())


if __name__ == '__main__':
  app.run(main)
