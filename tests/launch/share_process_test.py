"""`Program.share_process`: nodes of several groups in one process."""

import json
import os
import sys

import cloudpickle
import pytest

from repertory import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Server:

  def pid(self) -> int:
    return os.getpid()


def _fail_once(marker: str) -> None:
  """Raises on its first run (after it was built), returns on the second."""
  if not os.path.exists(marker):
    with open(marker, 'w') as f:
      f.write('failed once')
    raise RuntimeError('the first run of flaky fails')
  with open(marker + '.again', 'w') as f:
    f.write('ran again')


def _check(server, out_path: str) -> None:
  with open(out_path, 'w') as f:
    json.dump({'server_pid': server.pid(), 'client_pid': os.getpid()}, f)


def _stop_when_written(*paths: str) -> None:
  """Stops the program once every file in `paths` exists (the servers
  serve until then)."""
  import time  # pylint: disable=g-import-not-at-top
  deadline = time.monotonic() + 120
  while (not all(os.path.exists(p) for p in paths) and
         time.monotonic() < deadline):
    time.sleep(0.05)
  launch.stop()


def _program(tmp_path) -> launch.Program:
  program = launch.Program('shared')
  with program.group('server'):
    server = program.add_node(launch.CourierNode(Server))
  with program.group('separate'):
    separate = program.add_node(launch.CourierNode(Server))
  with program.group('flaky'):
    program.add_node(launch.PyNode(_fail_once, str(tmp_path / 'marker')))
  with program.group('client'):
    program.add_node(launch.PyNode(_check, server, str(tmp_path / 'a.json')))
    program.add_node(launch.PyNode(_check, separate,
                                   str(tmp_path / 'b.json')))
  with program.group('stopper'):
    program.add_node(launch.PyNode(
        _stop_when_written, *(str(tmp_path / f) for f in ('a.json', 'b.json',
                                                          'marker.again'))))
  return program


def test_units_of_the_groups_become_one_named_by_the_first_label(tmp_path):
  program = _program(tmp_path)
  before = [u.unit_id for u in program.units]
  assert before == ['server/0', 'separate/0', 'flaky/0', 'client/0',
                    'client/1', 'stopper/0']
  client_handles = [n.create_handle() for n in program.groups['client']]
  assert program.share_process('server', 'client', 'flaky') == 'server/0'
  units = {u.unit_id: u for u in program.units}
  assert list(units) == ['server/0', 'separate/0', 'stopper/0']
  assert [n.node_id for n in units['server/0'].nodes] == [
      'server/0', 'client/0', 'client/1', 'flaky/0']
  assert units['server/0'].label == 'server'
  # Handles (already held by other nodes' arguments) point at the new unit.
  assert [h._unit_id for h in client_handles] == ['server/0', 'server/0']  # pylint: disable=protected-access
  assert program.groups['separate'][0].create_handle()._unit_id == (  # pylint: disable=protected-access
      'separate/0')


def test_fewer_than_two_units_and_multiprocessing_colocations_stay(tmp_path):
  program = _program(tmp_path)
  assert program.share_process('server', 'no_such_group') is None
  with program.group('pair'):
    program.add_node(launch.MultiProcessingColocation(
        [launch.CourierNode(Server), launch.CourierNode(Server)]))
  assert program.share_process('pair', 'separate') is None
  assert len(program.units) == 8


def test_a_bad_label_is_refused_with_the_rule():
  program = launch.Program('p')
  with pytest.raises(ValueError, match="Group label 'a b'"):
    program.share_process('a b', 'c')


def test_local_mp_runs_shared_nodes_in_one_process_and_restarts_a_thread(
    tmp_path):
  program = _program(tmp_path)
  program.share_process('server', 'client', 'flaky')
  launched = launch.launch(program, launch_type='local_mp',
                           logdir=str(tmp_path / 'logs'),
                           termination_notice_secs=5,
                           max_restarts={'flaky': 1})
  assert not launched.is_running()
  a = json.loads((tmp_path / 'a.json').read_text())
  b = json.loads((tmp_path / 'b.json').read_text())
  assert a['server_pid'] == a['client_pid']  # One process: server, client.
  assert b['server_pid'] != b['client_pid']  # 'separate' has its own.
  assert b['client_pid'] == a['client_pid']
  assert (tmp_path / 'marker.again').exists()  # flaky failed, ran again.
  logs = sorted(p.name for p in (tmp_path / 'logs').iterdir())
  assert logs == ['separate_0.log', 'server_0.log', 'stopper_0.log']
  assert 'restarting it (1 of max_restarts=1)' in (
      tmp_path / 'logs' / 'server_0.log').read_text()


def test_spread_group_runs_consecutive_units_in_at_most_n_processes():
  program = launch.Program('spread')
  with program.group('learner'):
    program.add_node(launch.CourierNode(Server))
  with program.group('actor'):
    handles = [program.add_node(launch.CourierNode(Server))
               for _ in range(5)]
    program.add_node(launch.MultiProcessingColocation(
        [launch.CourierNode(Server), launch.CourierNode(Server)]))
  assert program.spread_group('actor', 2) == [
      'actor/0', 'actor/3', 'actor/5.0', 'actor/5.1']
  units = {u.unit_id: [n.node_id for n in u.nodes] for u in program.units}
  assert units == {'learner/0': ['learner/0'],
                   'actor/0': ['actor/0', 'actor/1', 'actor/2'],
                   'actor/3': ['actor/3', 'actor/4'],
                   'actor/5.0': ['actor/5.0'], 'actor/5.1': ['actor/5.1']}
  assert [h._unit_id for h in handles] == [  # pylint: disable=protected-access
      'actor/0', 'actor/0', 'actor/0', 'actor/3', 'actor/3']
  assert program.spread_group('actor', 8) == [
      'actor/0', 'actor/3', 'actor/5.0', 'actor/5.1']
  with pytest.raises(ValueError, match='processes=0 must be an int >= 1'):
    program.spread_group('actor', 0)


def _record_start(path: str) -> None:
  """Appends this process's pid to `path`, then serves until the stop."""
  with open(path, 'a') as f:
    f.write(f'{os.getpid()}\n')
  launch.wait_for_stop()


def test_local_mp_restarts_a_spread_node_in_its_thread(tmp_path):
  program = launch.Program('spread')
  with program.group('worker'):
    program.add_node(launch.PyNode(_record_start, str(tmp_path / 'steady')))
    program.add_node(launch.PyNode(_fail_once, str(tmp_path / 'marker')))
  with program.group('stopper'):
    program.add_node(launch.PyNode(
        _stop_when_written, str(tmp_path / 'steady'),
        str(tmp_path / 'marker.again')))
  assert program.spread_group('worker', 1) == ['worker/0']
  launched = launch.launch(program, launch_type='local_mp',
                           logdir=str(tmp_path / 'logs'),
                           termination_notice_secs=5,
                           max_restarts={'worker': 1})
  assert not launched.is_running()
  assert launched.error is None, launched.error
  assert (tmp_path / 'marker.again').exists()  # Failed once, ran again.
  # The other worker of the process was neither restarted nor moved.
  assert len((tmp_path / 'steady').read_text().split()) == 1
  log = (tmp_path / 'logs' / 'worker_0.log').read_text()
  assert 'restarting it (1 of max_restarts=1)' in log
