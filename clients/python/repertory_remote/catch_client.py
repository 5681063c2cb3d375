r"""A remote Catch game in Python: plays episodes against the service.

The game is written here from bsuite's rules (the same as
`repertory.environments.catch` and `clients/node/catch.js`), so that this
process needs only numpy, grpcio and protobuf:

  python -m repertory_remote.catch_client --address_file=runs/x/remote/address \
      --seconds=60 --threads=4

It prints one JSON line at the end: episodes, mean return of the last 100,
actions, action latency percentiles (ms), reconnections.
"""

import argparse
import json
import os
import sys
import threading
import time
from typing import List, Optional

import numpy as np

from repertory_remote import client as client_lib

ROWS, COLUMNS = 10, 5
SPECS = client_lib.Specs((ROWS, COLUMNS), 'float32', 3)
GRACE_S = 2.0  # A step in flight at --seconds may take this much longer.


class Catch:
  """bsuite's Catch: a falling ball, a paddle moved by actions 0, 1, 2."""

  def __init__(self, seed: Optional[int] = None):
    self._rng = np.random.RandomState(seed)

  def reset(self) -> np.ndarray:
    self.ball_x = self._rng.randint(COLUMNS)
    self.ball_y = 0
    self.paddle_x = COLUMNS // 2
    return self._board()

  def step(self, action: int):
    """Returns (observation, reward, terminal)."""
    self.paddle_x = min(max(self.paddle_x + (action - 1), 0), COLUMNS - 1)
    self.ball_y += 1
    if self.ball_y == ROWS - 1:
      return self._board(), (1.0 if self.paddle_x == self.ball_x else -1.0), True
    return self._board(), 0.0, False

  def _board(self) -> np.ndarray:
    board = np.zeros((ROWS, COLUMNS), np.float32)
    board[self.ball_y, self.ball_x] = 1.0
    board[ROWS - 1, self.paddle_x] = 1.0
    return board


class Stats:
  def __init__(self):
    self.lock = threading.Lock()
    self.returns: List[float] = []
    self.latencies: List[float] = []
    self.actions = 0
    self.interrupted = 0
    self.server_ids: List[str] = []
    self.episodes_at_connect = 0
    # Set once the episodes asked for are played: the threads still waiting
    # for an episode the service has not started are then let go.
    self.enough = threading.Event()

  def summary(self, client: client_lib.Client, seconds: float) -> dict:
    latencies = np.asarray(self.latencies) * 1000.0
    last = self.returns[-100:]
    return {
        'episodes': len(self.returns), 'actions': self.actions,
        'seconds': round(seconds, 3),
        'actions_per_s': round(self.actions / max(seconds, 1e-9), 1),
        'mean_return_last_100': float(np.mean(last)) if last else None,
        'latency_ms_p50': (round(float(np.percentile(latencies, 50)), 3)
                           if len(latencies) else None),
        'latency_ms_p99': (round(float(np.percentile(latencies, 99)), 3)
                           if len(latencies) else None),
        'interrupted_episodes': self.interrupted,
        'connects': client.num_connects,
        'server_ids': self.server_ids,
        'episodes_since_last_connect': (len(self.returns) -
                                        self.episodes_at_connect),
    }


def play(client: client_lib.Client, game: Catch, stats: Stats,
         deadline: float, max_episodes: int, hold_after: int,
         logged: bool, until_connects: int = 0, episodes_after: int = 0
         ) -> None:
  """Plays episodes until the deadline or the episode budget (or, with
  `until_connects`, until that many connections were made and
  `episodes_after` episodes were played on the last one). Nothing waits
  past the deadline by more than `GRACE_S`: connecting gives up at the
  deadline, a step `GRACE_S` after it."""

  def left() -> float:
    return min(client.step_timeout_s,
               max(deadline - time.monotonic(), 0.0) + GRACE_S)

  def played_enough() -> bool:
    with stats.lock:
      return bool(
          (max_episodes and len(stats.returns) >= max_episodes) or
          (until_connects and client.num_connects >= until_connects and
           len(stats.returns) - stats.episodes_at_connect >= episodes_after))

  while time.monotonic() < deadline and not stats.enough.is_set():
    if played_enough():
      stats.enough.set()
      return
    try:
      episode = client.episode(timeout_s=deadline - time.monotonic())
      if stats.enough.is_set():
        return
      with stats.lock:
        if client.server_id not in stats.server_ids:
          stats.server_ids.append(client.server_id)
          stats.episodes_at_connect = len(stats.returns)
      observation = game.reset()
      start = time.perf_counter()
      if logged:
        action = int(game._rng.randint(3))  # pylint: disable=protected-access
        episode.step(observation, logged_action=action,
                     timeout_s=left())
      else:
        action = episode.step(observation, timeout_s=left())
      latency = [time.perf_counter() - start]
      total, steps = 0.0, 0
      while True:
        observation, reward, terminal = game.step(action)
        total += reward
        steps += 1
        if hold_after and steps == hold_after:
          print('HOLDING', flush=True)  # A test kills us now, mid-episode.
          time.sleep(3600)
        start = time.perf_counter()
        if terminal:
          episode.step(observation, reward, terminal=True, timeout_s=left())
          latency.append(time.perf_counter() - start)
          break
        if logged:
          action = int(game._rng.randint(3))  # pylint: disable=protected-access
          episode.step(observation, reward, logged_action=action,
                       timeout_s=left())
        else:
          action = episode.step(observation, reward, timeout_s=left())
        latency.append(time.perf_counter() - start)
    except client_lib.SessionLost as e:
      if stats.enough.is_set():
        return  # Let go at the end (see `Stats.enough`).
      with stats.lock:
        stats.interrupted += 1
      print(f'episode interrupted ({e}); starting a new one', file=sys.stderr,
            flush=True)
      continue
    with stats.lock:
      stats.returns.append(total)
      stats.actions += len(latency)
      stats.latencies.extend(latency)


def wait_for_address(path: str, timeout_s: float) -> str:
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    if os.path.exists(path):
      with open(path) as f:
        text = f.read().strip()
      if text:
        return text
    time.sleep(0.2)
  raise TimeoutError(f'{path} did not appear within {timeout_s} s')


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--address', default='')
  parser.add_argument('--address_file', default='')
  parser.add_argument('--token', default=None,
                      help='default: $REPERTORY_REMOTE_TOKEN or '
                      '<address_file folder>/token')
  parser.add_argument('--seconds', type=float, default=30.0)
  parser.add_argument('--episodes', type=int, default=0, help='0: no limit')
  parser.add_argument('--threads', type=int, default=1,
                      help='concurrent episodes in this process')
  parser.add_argument('--hold_after', type=int, default=0,
                      help='block forever after this many steps of the first '
                      'episode (for kill tests)')
  parser.add_argument('--logged', action='store_true',
                      help='act randomly and send the actions as logged')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--until_connects', type=int, default=0,
                      help='stop once this many connections were made and '
                      '--episodes_after episodes played on the last')
  parser.add_argument('--episodes_after', type=int, default=10)
  parser.add_argument('--connect_timeout', type=float, default=120.0,
                      help='seconds to retry (re)connecting before failing')
  parser.add_argument('--root_certificates', default='',
                      help='PEM file of the root certificate(s) to trust: '
                      'connect with TLS (default: plain TCP)')
  parser.add_argument('--latency_file', default='',
                      help='write every action latency (s) there (.npy)')
  args = parser.parse_args(argv)
  address = args.address or wait_for_address(args.address_file, 300.0)
  token = args.token
  if token is None and not os.environ.get(client_lib.specs_lib.TOKEN_ENV_VAR):
    with open(os.path.join(os.path.dirname(args.address_file), 'token')) as f:
      token = f.read().strip()
  root_certificates = None
  if args.root_certificates:
    with open(args.root_certificates, 'rb') as f:
      root_certificates = f.read()
  client = client_lib.Client(address, SPECS, token=token,
                             client_name=f'catch_client.py pid {os.getpid()}',
                             root_certificates=root_certificates,
                             connect_timeout_s=args.connect_timeout)
  stats = Stats()
  start = time.monotonic()
  deadline = start + args.seconds
  threads = [threading.Thread(
      target=play, args=(client, Catch(args.seed * 1000 + i), stats, deadline,
                         args.episodes, args.hold_after if i == 0 else 0,
                         args.logged, args.until_connects,
                         args.episodes_after))
             for i in range(args.threads)]
  for thread in threads:
    thread.start()
  while any(thread.is_alive() for thread in threads):
    if stats.enough.wait(timeout=0.2):
      # Threads waiting on an episode the service never started (it has
      # fewer environments than --threads) see their session end.
      client.close()
      break
  for thread in threads:
    thread.join()
  if args.latency_file:
    np.save(args.latency_file, np.asarray(stats.latencies))
  print(json.dumps(stats.summary(client, time.monotonic() - start)),
        flush=True)
  client.close()


if __name__ == '__main__':
  main()
