"""Launchpad's own launch and node tests, restated for repertory (threads).

Each test states a behaviour Launchpad documents or tests
(google-deepmind/launchpad: launch/test_multi_threading/launch_test.py,
nodes/*/node_test.py, examples/consumer_producers/launch_test.py) and checks
it with `import repertory.launch as lp` in place of `import launchpad as lp`.
The multi-process ones are in launchpad_mp_test.py.
"""

import datetime
import threading
import time

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import repertory.launch as lp

LAUNCH_TYPES = ('test_mt', 'local_mt')

def _block():
  lp.wait_for_stop()


def _stop(stopper):
  stopper()


class LaunchTest(parameterized.TestCase):

  def test_one_py_node_program(self):
    has_run = threading.Event()
    program = lp.Program('test')
    program.add_node(lp.PyNode(has_run.set), label='run')
    lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertTrue(has_run.wait(30))

  def test_wait_reraises_the_nodes_own_exception(self):
    def run():
      raise RuntimeError('Launchpad has stopped working')

    program = lp.Program('test')
    program.add_node(lp.PyNode(run), label='run')
    with self.assertRaisesRegex(RuntimeError,
                                'Launchpad has stopped working') as info:
      waiter = lp.launch(program, launch_type='test_mt', test_case=self)
      waiter.wait()
    # Also a NodeError that names the node.
    self.assertIsInstance(info.exception, lp.NodeError)
    self.assertEqual(info.exception.node_id, 'run/0')
    self.assertIn("Node 'run/0'", info.exception.__notes__[-1])

  def test_an_exception_that_cannot_be_subclassed_still_names_the_node(self):
    class Strict(Exception):
      def __init_subclass__(cls, **kwargs):
        raise TypeError('no subclasses')

    def run():
      raise Strict('strict')

    program = lp.Program('test')
    program.add_node(lp.PyNode(run), label='run')
    with self.assertRaises(lp.NodeError) as info:
      lp.launch(program, launch_type='test_mt', test_case=self).wait()
    self.assertIsInstance(info.exception.__cause__, Strict)
    self.assertIn("Node 'run/0'", str(info.exception))

  @parameterized.parameters(*LAUNCH_TYPES)
  def test_program_stopper(self, launch_type):
    program = lp.Program('test')
    with program.group('block'):
      program.add_node(lp.PyNode(_block))
    with program.group('stop'):
      program.add_node(lp.PyNode(_stop, lp.make_program_stopper(launch_type)))
    waiter = lp.launch(program, launch_type=launch_type, test_case=self)
    self.assertTrue(waiter.wait(timeout=60))

  def test_cleanup_stops_the_program_when_the_test_ends(self):
    stopped = threading.Event()

    def block():
      lp.wait_for_stop()
      stopped.set()

    program = lp.Program('test')
    with program.group('block'):
      program.add_node(lp.PyNode(block))
    inner = absltest.TestCase()
    lp.launch(program, launch_type='test_mt', test_case=inner)
    self.assertFalse(stopped.wait(0.2))
    inner.doCleanups()
    self.assertTrue(stopped.is_set())

  def test_launch_type_enum_and_flags(self):
    self.assertEqual(lp.LaunchType.LOCAL_MULTI_THREADING, 'local_mt')
    self.assertTrue(lp.is_local_launch('local_mp'))
    self.assertFalse(lp.is_local_launch(lp.LaunchType.TEST_MULTI_THREADING))
    self.assertTrue(lp.is_local_launch_or_test('test_mp'))
    self.assertFalse(lp.is_local_launch_or_test('ray'))
    with self.assertRaisesRegex(ValueError, "'vertex_ai'.*'local_mt'"):
      lp.is_local_launch('vertex_ai')
    self.assertEqual(lp.LAUNCH_TYPE.name, 'lp_launch_type')
    self.assertIs(lp.flags.LAUNCH_TYPE, lp.LAUNCH_TYPE)
    seen = []
    program = lp.Program('test')
    program.add_node(lp.PyNode(lambda: seen.append(lp.get_launch_type())),
                     label='n')
    lp.launch(program, launch_type=lp.LaunchType.TEST_MULTI_THREADING,
              test_case=self).wait(timeout=30)
    self.assertEqual(seen, ['test_mt'])

  def test_wait_for_some_groups_only(self):
    program = lp.Program('test')
    with program.group('main'):
      program.add_node(lp.PyNode(lambda: None))
    with program.group('daemon'):
      program.add_node(lp.PyNode(_block))
    waiter = lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertTrue(waiter.wait(['main']))
    self.assertTrue(waiter.is_running())  # The daemon still runs.

  def test_wait_for_some_groups_raises_a_failure_anywhere(self):
    def fail():
      raise RuntimeError('Some error.')

    program = lp.Program('test')
    with program.group('main'):
      program.add_node(lp.PyNode(_block))
    with program.group('daemon'):
      program.add_node(lp.PyNode(fail))
    waiter = lp.launch(program, launch_type='test_mt', test_case=self)
    with self.assertRaisesRegex(RuntimeError, 'Some error'):
      waiter.wait(['main'])

  def test_wait_for_stop_takes_timeout_secs(self):
    results = []

    def node():
      results.append(lp.wait_for_stop(timeout_secs=0.01))
      results.append(lp.wait_for_stop(timeout=0.01))

    program = lp.Program('test')
    program.add_node(lp.PyNode(node), label='n')
    lp.launch(program, launch_type='test_mt', test_case=self).wait(timeout=30)
    self.assertEqual(results, [False, False])

  def test_stop_handlers_can_be_unregistered(self):
    calls = []

    def node():
      lp.register_stop_handler(lambda: calls.append('kept'))
      dropped = lambda: calls.append('dropped')
      lp.register_stop_handler(dropped)
      lp.unregister_stop_handler(dropped)
      lp.stop()

    program = lp.Program('test')
    program.add_node(lp.PyNode(node), label='n')
    lp.launch(program, launch_type='test_mt', test_case=self).wait(timeout=30)
    self.assertEqual(calls, ['kept'])

  def test_add_node_labels_follow_launchpad(self):
    program = lp.Program('test')
    with self.assertRaisesRegex(ValueError, 'non-empty'):
      program.add_node(lp.PyNode(print), label='')
    with program.group('actor'):
      with self.assertRaisesRegex(ValueError, "label must match the group"):
        program.add_node(lp.PyNode(print), label='learner')
      program.add_node(lp.PyNode(print), label='actor')
    with self.assertRaisesRegex(ValueError, 'cannot be nested'):
      with program.group('a'):
        with program.group('b'):
          pass
    colocation = lp.MultiThreadingColocation([lp.PyNode(print)])
    program.add_node(colocation, label='coloc')
    self.assertLen(program.get_all_nodes(), 2)  # A colocation is one node.
    self.assertIs(program.get_all_nodes()[1], colocation)

  def test_make_program(self):
    ran = threading.Event()
    program = lp.make_program(lp.PyNode(ran.set), name='one_liner')
    self.assertEqual(program.name, 'one_liner')
    lp.launch(program, launch_type='test_mt', test_case=self).wait(timeout=30)
    self.assertTrue(ran.is_set())

  def test_sigterm_patched_launchers_can_use_test_case_with_a_list(self):
    # Launchpad's launch() takes a list of programs (launching the first).
    ran = threading.Event()
    program = lp.Program('test')
    program.add_node(lp.PyNode(ran.set), label='n')
    lp.launch([program], launch_type='test_mt', test_case=self).wait(
        timeout=30)
    self.assertTrue(ran.is_set())

  def test_a_node_that_ignores_stop_in_python_code_is_killed(self):
    finished = threading.Event()

    def stubborn():
      try:
        while True:  # Never looks at the stop event.
          time.sleep(0.01)
      finally:
        finished.set()

    program = lp.Program('test')
    program.add_node(lp.PyNode(stubborn), label='stubborn')
    program.add_node(lp.PyNode(lp.stop), label='stopper')
    waiter = lp.launch(program, launch_type='test_mt',
                       termination_notice_secs=0.2)
    self.assertTrue(waiter.wait(timeout=30))
    self.assertTrue(finished.is_set())


class Server:
  """Answers ping() and calls of the object itself."""

  def ping(self):
    return 'pong'

  def __call__(self):
    return 'called'


class CourierNodeTest(parameterized.TestCase):

  def test_ping_pong_and_futures(self):
    program = lp.Program('test')
    handle = program.add_node(lp.CourierNode(Server), label='server')
    self.assertIsInstance(handle, lp.CourierHandle)
    lp.launch(program, launch_type='test_mt', test_case=self)
    client = handle.dereference()
    self.assertEqual(client.ping(), 'pong')
    self.assertEqual(client(), 'called')
    self.assertEqual(client.futures.ping().result(), 'pong')
    self.assertEqual(client.futures().result(), 'called')
    # (That a courier program needs no TensorFlow is import_test's check, in a
    # fresh interpreter: another test in this process may have imported it.)

  def test_courier_kwargs_are_not_passed_to_the_constructor(self):
    program = lp.Program('test')
    handle = program.add_node(
        lp.CourierNode(Server, courier_kwargs={'thread_pool_size': 4},
                       courier_client_kwargs={'call_timeout': 10}),
        label='server')
    lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertEqual(handle.dereference().ping(), 'pong')

  def test_cyclic_reference_with_configure(self):
    seen = {}

    class Foo:
      def __init__(self, bar=None):
        seen['foo_has'] = bar

      def name(self):
        return 'foo'

    class Bar:
      def __init__(self, foo):
        seen['bar_got'] = foo.name()

      def name(self):
        return 'bar'

    foo_node = lp.CourierNode(Foo)
    foo_handle = foo_node.create_handle()
    bar_node = lp.CourierNode(Bar, foo_handle)
    foo_node.configure(bar=bar_node.create_handle())
    program = lp.Program('test')
    program.add_node(foo_node, label='foo')
    program.add_node(bar_node, label='bar')
    lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertEqual(foo_handle.dereference().name(), 'foo')
    deadline = time.monotonic() + 30
    while 'bar_got' not in seen and time.monotonic() < deadline:
      time.sleep(0.01)
    self.assertEqual(seen['bar_got'], 'foo')
    self.assertIsInstance(seen['foo_has'], lp.CourierClient)

  @parameterized.parameters(*LAUNCH_TYPES)
  def test_a_courier_node_whose_run_returns_ends_the_program(self,
                                                            launch_type):
    class Once:
      def run(self):
        pass

      def ping(self):
        return 'pong'

    program = lp.Program('test')
    program.add_node(lp.CourierNode(Once), label='once')
    waiter = lp.launch(program, launch_type=launch_type, test_case=self)
    self.assertTrue(waiter.wait(timeout=60))

  def test_a_courier_node_whose_run_returned_serves_no_more(self):
    returned = threading.Event()

    class Once:
      def run(self):
        returned.set()

      def ping(self):
        return 'pong'

    program = lp.Program('test')
    handle = program.add_node(lp.CourierNode(Once), label='once')
    program.add_node(lp.PyNode(_block), label='daemon')
    waiter = lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertTrue(waiter.wait(['once'], timeout=30))
    with self.assertRaisesRegex(lp.LaunchError, 'run\\(\\) returned'):
      handle.dereference().ping()

  def test_enable_run_undoes_disable_run(self):
    ran = threading.Event()

    class Runner:
      def run(self):
        ran.set()

    node = lp.PyClassNode(Runner)
    node.disable_run()
    node.enable_run()
    program = lp.Program('test')
    program.add_node(node, label='runner')
    lp.launch(program, launch_type='test_mt', test_case=self).wait(timeout=30)
    self.assertTrue(ran.is_set())


class ColocationTest(parameterized.TestCase):

  def test_preemption(self):
    ready_to_preempt = threading.Event()
    preemption_ok = threading.Event()

    def node():
      ready_to_preempt.set()
      lp.wait_for_stop()
      preemption_ok.set()

    def stopper():
      ready_to_preempt.wait()
      lp.stop()

    program = lp.Program('test')
    program.add_node(
        lp.MultiThreadingColocation([lp.PyNode(node), lp.PyNode(stopper)]),
        label='coloc')
    lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertTrue(preemption_ok.wait(30))

  def test_exception_propagation(self):
    def raise_error():
      raise RuntimeError('Foo')

    program = lp.Program('test')
    program.add_node(lp.MultiThreadingColocation(
        [lp.PyNode(raise_error), lp.PyNode(_block)]), label='coloc')
    with self.assertRaisesRegex(RuntimeError, 'Foo'):
      lp.launch(program, launch_type='test_mt', test_case=self).wait()

  def test_first_completed(self):
    quick_done = threading.Event()
    slow_can_start = threading.Event()
    slow_done = threading.Event()

    def slow():
      slow_can_start.wait()
      slow_done.set()

    program = lp.Program('test')
    program.add_node(lp.MultiThreadingColocation(
        [lp.PyNode(quick_done.set), lp.PyNode(slow)],
        return_on_first_completed=True), label='coloc')
    program.add_node(lp.PyNode(_block), label='daemon')
    waiter = lp.launch(program, launch_type='test_mt', test_case=self)
    # The colocation counts as finished without waiting for slow.
    self.assertTrue(waiter.wait(['coloc'], timeout=30))
    self.assertTrue(quick_done.is_set())
    self.assertFalse(slow_done.is_set())
    slow_can_start.set()
    self.assertTrue(slow_done.wait(30))

  def test_all_completed(self):
    f1_done = threading.Event()
    f2_done = threading.Event()
    program = lp.Program('test')
    program.add_node(lp.MultiThreadingColocation(
        [lp.PyNode(f1_done.set), lp.PyNode(f2_done.set)],
        return_on_first_completed=False), label='coloc')
    lp.launch(program, launch_type='test_mt', test_case=self).wait(timeout=30)
    self.assertTrue(f1_done.is_set() and f2_done.is_set())

  @parameterized.parameters(False, True)
  def test_stop(self, nested):
    inner = [lp.PyNode(_block), lp.PyNode(lp.stop)]
    nodes = ([lp.PyNode(_block), lp.MultiThreadingColocation(inner)]
             if nested else inner)
    program = lp.Program('stop')
    program.add_node(lp.MultiThreadingColocation(nodes), label='node')
    waiter = lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertTrue(waiter.wait(timeout=30))

  def test_ping_through_an_address(self):
    address = lp.Address()
    has_ping = threading.Event()

    def run_server():
      import socket  # pylint: disable=g-import-not-at-top
      port = lp.get_port_from_address(address.resolve())
      with socket.create_server(('localhost', port)) as server:
        server.settimeout(30)
        conn, _ = server.accept()
        with conn:
          if conn.recv(4) == b'ping':
            has_ping.set()
      lp.wait_for_stop()

    def run_client():
      import socket  # pylint: disable=g-import-not-at-top
      host, port = address.resolve().rsplit(':', 1)
      deadline = time.monotonic() + 30
      while True:
        try:
          with socket.create_connection((host, int(port)), timeout=5) as c:
            c.sendall(b'ping')
          return
        except OSError:
          if time.monotonic() > deadline:
            raise
          time.sleep(0.05)

    server_node = lp.PyNode(run_server)
    server_node.allocate_address(address)
    program = lp.Program('test')
    program.add_node(lp.MultiThreadingColocation(
        [lp.PyNode(run_client), server_node]), label='client_server')
    lp.launch(program, launch_type='test_mt', test_case=self)
    self.assertTrue(has_ping.wait(30))
    self.assertEqual(lp.get_port_from_address('localhost:1234'), 1234)


class ReverbNodeTest(absltest.TestCase):

  def test_insert_and_a_checkpoint_period_without_a_checkpointer(self):
    import reverb  # pylint: disable=g-import-not-at-top

    def priority_tables_fn():
      return [reverb.Table(
          name='dist', sampler=reverb.selectors.Uniform(),
          remover=reverb.selectors.Fifo(), max_size=100,
          rate_limiter=reverb.rate_limiters.MinSize(100))]

    program = lp.Program('test')
    handle = program.add_node(
        lp.ReverbNode(priority_tables_fn, checkpoint_time_delta_minutes=5),
        label='replay')
    lp.launch(program, launch_type='test_mt', test_case=self)
    client = handle.dereference()
    client.insert([np.zeros((81, 81))], {'dist': 1})
    self.assertEqual(client.server_info()['dist'].current_size, 1)


class BatchedHandlerTest(absltest.TestCase):

  def test_wrapped_in_init_as_launchpad_documents(self):
    class Doubler:
      def __init__(self):
        self.sizes = []
        self.double = lp.batched_handler(batch_size=2)(self.double)

      def double(self, x):
        self.sizes.append(len(x))
        return 2 * x

    program = lp.Program('test')
    handle = program.add_node(lp.CourierNode(Doubler), label='server')
    lp.launch(program, launch_type='test_mt', test_case=self)
    client = handle.dereference()
    futures = [client.futures.double(np.float32(i)) for i in range(2)]
    self.assertEqual(sorted(float(f.result(30)) for f in futures), [0.0, 2.0])
    # One call alone runs after the default 200 ms timeout.
    self.assertEqual(float(client.double(np.float32(5))), 10.0)

  def test_arguments_as_launchpad(self):
    wrapped = lp.batched_handler(
        batch_size=4, max_parallelism=2,
        timeout=datetime.timedelta(milliseconds=10), pad_batch=True)(
            lambda x: x + 1)
    self.assertEqual(int(wrapped(np.int32(1))), 2)
    with self.assertRaisesRegex(ValueError, 'timedelta or seconds'):
      lp.batched_handler(batch_size=2, timeout='1s')


if __name__ == '__main__':
  absltest.main()
