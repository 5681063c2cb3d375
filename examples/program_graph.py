"""Producers call a consumer; run with --lp_launch_type=test_mt|local_mt|local_mp|ray."""

from absl import app
from repertory import launch


class Consumer:

  def __init__(self, num_producers: int):
    self._remaining = num_producers

  def put(self, producer: int, value: int) -> None:
    print(f'consumer got {value} from producer {producer}', flush=True)
    self._remaining -= 1
    if self._remaining == 0:
      launch.stop()  # ends the whole program, in every launch type


def produce(index: int, consumer) -> None:
  consumer.put(index, index * index)  # `consumer` arrived dereferenced


def main(_):
  program = launch.Program('program_graph')
  with program.group('consumer'):
    consumer = program.add_node(launch.CourierNode(Consumer, 3))
  with program.group('producer'):
    for i in range(3):
      program.add_node(launch.PyNode(produce, i, consumer))
  launch.launch(program).wait()  # launch type from --lp_launch_type


if __name__ == '__main__':
  app.run(main)
