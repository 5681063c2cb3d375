"""What a resumed run continues besides the learner: counts and CSV logs."""

import csv

from repertory import launch
from repertory.components import counting
from repertory.components import loggers


def test_csv_logger_appends_to_an_existing_file(tmp_path):
  first = loggers.CSVLogger(str(tmp_path), 'learner')
  first.write({'steps': 1, 'loss': 0.5})
  first.write({'steps': 2, 'loss': 0.4})
  first.close()
  with open(first.path, 'a') as f:  # A process killed mid-row.
    f.write('0.35,3')

  resumed = loggers.CSVLogger(str(tmp_path), 'learner')
  resumed.write({'loss': 0.3, 'steps': 4})
  resumed.write({'loss': 0.2, 'steps': 5, 'new': 1.0})  # Widens the file.
  resumed.close()
  with open(first.path, newline='') as f:
    rows = list(csv.DictReader(f))
  assert [r['steps'] for r in rows] == ['1', '2', '3', '4', '5']
  assert rows[-1]['new'] == '1.0' and rows[0]['new'] == ''


def test_counter_counts_continue_from_its_checkpoint(tmp_path):
  path = str(tmp_path / 'counts.json')
  counter = counting.Counter(checkpoint_path=path,
                             checkpoint_every_seconds=0.0)
  counter.increment(actor_steps=100, learner_steps=3)
  counter.increment(actor_steps=20)

  resumed = counting.Counter(checkpoint_path=path)
  assert resumed.get_counts() == {'actor_steps': 120, 'learner_steps': 3}
  resumed.increment(learner_steps=1)
  assert resumed.get_counts()['learner_steps'] == 4


def test_counter_node_saves_its_counts_when_the_program_stops(tmp_path):
  path = str(tmp_path / 'counts.json')
  program = launch.Program('counts')
  with program.group('counter'):
    node = program.add_node(launch.CourierNode(
        counting.Counter, checkpoint_path=path,
        checkpoint_every_seconds=3600.0))
  launched = launch.launch(program, launch_type='test_mt')
  node.dereference().increment(actor_steps=7)
  launched.stop(timeout=30)
  assert counting.Counter(checkpoint_path=path).get_counts() == {
      'actor_steps': 7}
