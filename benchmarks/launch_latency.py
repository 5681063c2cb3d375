"""Start-up and call latency of repertory.launch on Ray (and on threads).

  python benchmarks/launch_latency.py --num_nodes=4 --calls=500 --repeats=3

Measures, on a local Ray instance bound to 127.0.0.1 (started once):
  * ray.init itself (what local_mp adds to every launch);
  * launch of a small program (num_nodes CourierNodes) with launch_type='ray'
    until every node answers a call, and its stop();
  * a blocking handle call (launcher -> node, and node -> node);
  * pipelined calls through `client.futures` (many in flight, then waited);
  * a blocking call node -> node over a direct TCP channel
    (`launch.serve_channel` / `launch.ChannelClient`: authenticated, msgpack),
    empty and carrying 8 Atari frames each way;
  * the same blocking call in threads (test_mt), and a plain Ray actor call
    (no repertory layer), for reference.

Prints a Markdown table (medians over the launches) under a line with the
date, the CPU count and the load average.
"""

import logging
import os
import statistics
import time

from absl import app
from absl import flags

from repertory import launch

_NUM_NODES = flags.DEFINE_integer('num_nodes', 4, 'CourierNodes per program.')
_CALLS = flags.DEFINE_integer('calls', 500, 'Calls per latency measurement.')
_REPEATS = flags.DEFINE_integer('repeats', 3, 'Program launches to time.')


class Echo:
  """A CourierNode that answers at once."""

  def __init__(self, peer=None):
    self._peer = peer
    self._channel = None

  def ping(self, x=None):
    return x

  def channel_address(self) -> str:
    if self._channel is None:
      self._channel = launch.serve_channel(self.ping)
    return self._channel.address

  def time_peer_channel_calls(self, n: int, payload=None) -> float:
    """Seconds per blocking call to the peer over its TCP channel (with
    `payload` as the argument, echoed back, if given)."""
    client = launch.ChannelClient(self._peer.channel_address())
    client.call(payload)
    start = time.perf_counter()
    for i in range(n):
      client.call(i if payload is None else payload)
    seconds = (time.perf_counter() - start) / n
    client.close()
    return seconds

  def time_peer_channel_frames(self, n: int) -> float:
    """The same with 8 Atari observations (8x84x84x4 uint8, 226 KB) each
    way: what the codec's copies cost."""
    import numpy as np  # pylint: disable=g-import-not-at-top
    return self.time_peer_channel_calls(
        n, np.zeros((8, 84, 84, 4), np.uint8))

  def time_peer_calls(self, n: int):
    """Seconds per blocking call and per pipelined call to the peer."""
    self._peer.ping()  # connect
    start = time.perf_counter()
    for i in range(n):
      self._peer.ping(i)
    blocking = (time.perf_counter() - start) / n
    start = time.perf_counter()
    futures = [self._peer.futures.ping(i) for i in range(n)]
    for f in futures:
      f.result()
    return blocking, (time.perf_counter() - start) / n


def make_program(num_nodes: int):
  program = launch.Program('latency')
  with program.group('echo'):
    handles = [program.add_node(launch.CourierNode(Echo))
               for _ in range(num_nodes - 1)]
  with program.group('caller'):
    caller = program.add_node(launch.CourierNode(Echo, handles[0]))
  return program, handles + [caller]


def time_calls(client, n: int):
  client.ping()
  start = time.perf_counter()
  for i in range(n):
    client.ping(i)
  blocking = (time.perf_counter() - start) / n
  start = time.perf_counter()
  futures = [client.futures.ping(i) for i in range(n)]
  for f in futures:
    f.result()
  return blocking, (time.perf_counter() - start) / n


def main(_):
  import ray  # pylint: disable=g-import-not-at-top
  started, load = time.gmtime(), os.getloadavg()[0]
  rows = []
  start = time.perf_counter()
  ray.init(address='local', _node_ip_address='127.0.0.1',
           include_dashboard=False, logging_level=logging.WARNING)
  rows.append(('ray.init (local, 127.0.0.1)', time.perf_counter() - start, 's'))
  startups, stops, results = [], [], []
  try:
    # Reference: a plain threaded Ray actor, no repertory layer.
    raw = ray.remote(Echo).options(max_concurrency=256, num_cpus=0).remote()
    ray.get(raw.ping.remote())
    start = time.perf_counter()
    for i in range(_CALLS.value):
      ray.get(raw.ping.remote(i))
    raw_blocking = (time.perf_counter() - start) / _CALLS.value
    start = time.perf_counter()
    ray.get([raw.ping.remote(i) for i in range(_CALLS.value)])
    raw_pipelined = (time.perf_counter() - start) / _CALLS.value
    ray.kill(raw)
    for _ in range(_REPEATS.value):
      program, handles = make_program(_NUM_NODES.value)
      start = time.perf_counter()
      launched = launch.launch(program, launch_type='ray', block=False,
                               termination_notice_secs=5)
      clients = [h.dereference() for h in handles]
      for c in clients:
        c.ping()
      startups.append(time.perf_counter() - start)
      results.append(time_calls(clients[0], _CALLS.value) +
                     clients[-1].time_peer_calls(_CALLS.value) +
                     (clients[-1].time_peer_channel_calls(_CALLS.value),
                      clients[-1].time_peer_channel_frames(_CALLS.value)))
      start = time.perf_counter()
      launched.stop(timeout=120)
      stops.append(time.perf_counter() - start)
  finally:
    ray.shutdown()
  med = statistics.median
  rows += [
      (f'launch {_NUM_NODES.value} nodes until all answer (ray)', med(startups),
       's'),
      ('stop() until every actor is gone (ray)', med(stops), 's'),
      ('blocking call, launcher -> node (ray)',
       med(r[0] for r in results) * 1e3, 'ms'),
      ('pipelined futures, launcher -> node (ray)',
       med(r[1] for r in results) * 1e3, 'ms/call'),
      ('blocking call, node -> node (ray)',
       med(r[2] for r in results) * 1e3, 'ms'),
      ('pipelined futures, node -> node (ray)',
       med(r[3] for r in results) * 1e3, 'ms/call'),
      ('blocking call over a launch channel, node -> node (ray)',
       med(r[4] for r in results) * 1e3, 'ms'),
      ('the same carrying 8x84x84x4 uint8 each way (ray)',
       med(r[5] for r in results) * 1e3, 'ms'),
      ('reference: plain Ray actor call, blocking', raw_blocking * 1e3, 'ms'),
      ('reference: plain Ray actor calls, pipelined', raw_pipelined * 1e3,
       'ms/call'),
  ]
  program, handles = make_program(2)
  launched = launch.launch(program, launch_type='test_mt')
  blocking, pipelined = time_calls(handles[0].dereference(), _CALLS.value)
  launched.stop(timeout=60)
  rows += [('blocking call (test_mt threads)', blocking * 1e6, 'us'),
           ('pipelined futures (test_mt threads)', pipelined * 1e6, 'us/call')]
  print(f'\n{time.strftime("%Y-%m-%d %H:%M UTC", started)}, '
        f'{os.cpu_count()} CPUs, load average {load:.2f} at start, '
        f'{os.getloadavg()[0]:.2f} at end; launches: {_REPEATS.value}, '
        f'nodes: {_NUM_NODES.value}, calls: {_CALLS.value}\n')
  print('| measurement (median) | value |')
  print('|---|---:|')
  for name, value, unit in rows:
    print(f'| {name} | {value:.3f} {unit} |')


if __name__ == '__main__':
  app.run(main)
