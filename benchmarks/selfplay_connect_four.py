r"""Connect Four: train the alphazero agent, then play it
against a random player and OpenSpiel's MCTS bot as first and as second
player.

  python benchmarks/selfplay_connect_four.py --seconds=420 --out=/tmp/c4 \
      --games=200 --mcts_simulations=100

Training runs `python -m repertory.run --agent=alphazero` (local_mp,
`--num_actors` actors) for `--seconds`. Rerunning with the same --out continues the same run
(and league) (train in chunks). `--train=false` only plays. Results (the tables of
`repertory.play`, the league's Elo per snapshot, games/s and actor steps/s)
are appended to the list in `<out>/connect_four.json`, one entry per
invocation (a chunk's results never replace an earlier chunk's).
`--snapshots=main@v600,main@v1200` also plays those league snapshots (a
win-rate curve over the run).
`--search=100` also plays the trained network (and the snapshots) searching
with that many simulations per move (`repertory.play`'s
`search:100:run:<out>` player: OpenSpiel's MCTS with the network's priors
and values).
"""

import json
import os
import signal
import subprocess
import sys
import time

from absl import app
from absl import flags

_SECONDS = flags.DEFINE_float('seconds', 420, 'Training wall time (this chunk).')
_OUT = flags.DEFINE_string('out', '/tmp/selfplay_c4', 'Run directory.')
_ENV = flags.DEFINE_string('env', 'openspiel:connect_four', 'The game: '
                           'openspiel:connect_four or its /relative view.')
_TRAIN = flags.DEFINE_bool('train', True, 'Train a chunk first.')
_GAMES = flags.DEFINE_integer('games', 200, 'Games per seat and opponent.')
_MCTS = flags.DEFINE_integer('mcts_simulations', 100, 'MCTS simulations.')
_CONFIG = flags.DEFINE_multi_string('config', [], 'Extra k=v agent settings.')
_GREEDY = flags.DEFINE_bool('greedy', False, 'The trained policy plays its '
                            'most likely legal move (repertory.play --greedy).')
_SNAPSHOTS = flags.DEFINE_list('snapshots', [], 'League snapshots to play '
                               'too, e.g. main@v600,main@v1200.')
_SEARCH = flags.DEFINE_integer('search', 0, 'Also play the network '
                               'searching with this many simulations (0: no).')
_AGENT = flags.DEFINE_enum('agent', 'alphazero', ['alphazero'],
                           'The agent to train.')
_NUM_ACTORS = flags.DEFINE_integer('num_actors', 2, 'Actors (alphazero).')
_OPPONENTS = flags.DEFINE_list('opponents', ['random', 'mcts'], 'Which to '
                               'play after training.')


def train(logdir: str) -> None:
  command = [sys.executable, '-m', 'repertory.run', f'--agent={_AGENT.value}',
             f'--env={_ENV.value}', '--max_actor_steps=1000000000000',
             '--stop_at_return=never', f'--logdir={logdir}']
  command += ['--lp_launch_type=local_mp', f'--num_actors={_NUM_ACTORS.value}']
  command += [f'--config.{c}' for c in _CONFIG.value]
  print(' '.join(command), flush=True)
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
  time.sleep(_SECONDS.value)
  process.send_signal(signal.SIGINT)
  try:
    process.wait(timeout=90)
  except subprocess.TimeoutExpired:
    process.kill()


def play(logdir: str, opponent: str, snapshot: str = '',
         search: int = 0) -> dict:
  greedy = '_greedy' if _GREEDY.value else ''
  player = f'run:{logdir}@{snapshot}' if snapshot else f'run:{logdir}'
  tag = f'{snapshot.replace("@", "_")}_' if snapshot else ''
  if search:
    player, tag = f'search:{search}:{player}', f'{tag}search{search}_'
  path = os.path.join(logdir,
                      f'play_{tag}{opponent.replace(":", "_")}{greedy}.json')
  command = [sys.executable, '-m', 'repertory.play',
             f'--env={_ENV.value}', f'--players={player},{opponent}',
             f'--games={_GAMES.value}', f'--json={path}',
             f'--greedy={_GREEDY.value}']
  begin = time.time()
  out = subprocess.run(command, capture_output=True, text=True, check=True)
  print(out.stdout, flush=True)
  with open(path) as f:
    result = json.load(f)
  result['seconds'] = time.time() - begin
  return result


def _append_results(path: str, results: dict) -> None:
  """Appends `results` to the JSON list at `path` (written whole to a
  temporary file, then renamed over it)."""
  entries = []
  if os.path.exists(path):
    with open(path) as f:
      entries = json.load(f)
    if isinstance(entries, dict):  # Written by an earlier version: one run.
      entries = [entries]
  entries.append(results)
  with open(path + '.tmp', 'w') as f:
    json.dump(entries, f, indent=1)
  os.replace(path + '.tmp', path)


def main(argv):
  del argv
  logdir = os.path.abspath(_OUT.value)
  if _TRAIN.value:
    train(logdir)
  results = {'loadavg': open('/proc/loadavg').read().split()[:3]}
  with open(os.path.join(logdir, 'counts.json')) as f:
    results['counts'] = json.load(f)
  with open(os.path.join(logdir, 'progress.csv')) as f:
    header, *rows = [line.strip().split(',') for line in f if line.strip()]
  results['progress_last'] = dict(zip(header, rows[-1])) if rows else {}
  results['snapshots'] = []
  for name in _OPPONENTS.value:
    opponent = 'random' if name == 'random' else f'mcts:{_MCTS.value}'
    results[opponent] = play(logdir, opponent)
    if _SEARCH.value:
      results.setdefault(f'search:{_SEARCH.value}', {})[opponent] = play(
          logdir, opponent, search=_SEARCH.value)
    for snapshot in _SNAPSHOTS.value:
      played = results.setdefault('snapshots_played', {}).setdefault(
          snapshot, {})
      played[opponent] = play(logdir, opponent, snapshot)
      if _SEARCH.value:
        played[f'search:{_SEARCH.value}'] = play(logdir, opponent, snapshot,
                                                 search=_SEARCH.value)
  results['greedy'] = _GREEDY.value
  _append_results(os.path.join(logdir, 'connect_four.json'), results)
  print(json.dumps({k: v for k, v in results.items() if k != 'snapshots'},
                   indent=1))
  if results['snapshots']:
    print('Elo of snapshots (every 5th):', [
        (s['step'], round(s['elo'] or 0)) for s in results['snapshots'][::5]])


if __name__ == '__main__':
  app.run(main)
