r"""Exploitability over wall time: the neurd agent's league on a poker game
beside OpenSpiel's tabular CFR run for the same wall time.

  python benchmarks/selfplay_poker.py --game=kuhn_poker --seconds=240 \
      --matchmaking=latest --out=/tmp/selfplay_kuhn

Trains `python -m repertory.run --agent=neurd --league=<matchmaking>`
(local_mt, one actor) for
`--seconds`, then reads the league's snapshots (their wall time is in
league.json) and computes OpenSpiel's exploitability of each snapshot and
of the average of the pool so far (each snapshot chosen with equal
probability per game: fictitious play's average policy). Then runs
`pyspiel.CFRSolver` for the same wall time (evaluation time excluded) and
records the exploitability of its average policy. A run continued on the
same --out directory (chunks of a few minutes) continues the same curve:
training seconds leave out the time between chunks. Writes
`<out>/exploitability.json` and, with --figure, a plot.
"""

import json
import os
import signal
import subprocess
import sys
import time

from absl import app
from absl import flags

_GAME = flags.DEFINE_string('game', 'kuhn_poker', 'An OpenSpiel poker game.')
_SECONDS = flags.DEFINE_float('seconds', 240, 'Training wall time.')
_MATCHMAKING = flags.DEFINE_string('matchmaking', 'latest', 'latest, uniform '
                                   'or pfsp.')
_OUT = flags.DEFINE_string('out', '/tmp/selfplay_poker', 'Run directory.')
_FIGURE = flags.DEFINE_string('figure', None, 'Where to draw the curves.')
_CONFIG = flags.DEFINE_multi_string('config', [], 'Extra --config.<k>=<v> '
                                    'for the agent, as k=v.')
_ENVS = flags.DEFINE_integer('envs_per_actor', 32, 'Games per actor.')
_REPLOT = flags.DEFINE_bool('replot', False, 'Only draw --out\'s '
                            'exploitability.json into --figure.')
_CFR = flags.DEFINE_bool('cfr', True, 'Also run CFR for the same time.')
_CFR_SECONDS = flags.DEFINE_float(
    'cfr_seconds', None, 'CFR\'s wall time (default: the league\'s training '
    'time; a cap keeps one locked chunk short when CFR has long converged).')
_RESUME = flags.DEFINE_bool('train', True, 'Train (False: only evaluate the '
                            'run already in --out, and CFR).')


def train(logdir: str) -> None:
  command = [sys.executable, '-m', 'repertory.run', '--agent=neurd',
             f'--env=openspiel:{_GAME.value}', '--lp_launch_type=local_mt',
             '--num_actors=1', f'--envs_per_actor={_ENVS.value}',
             '--max_actor_steps=1000000000000', '--stop_at_return=never',
             f'--logdir={logdir}', f'--league={_MATCHMAKING.value}'] + [
                 f'--config.{c}' for c in _CONFIG.value]
  print(' '.join(command), flush=True)
  start = time.time()
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
  time.sleep(_SECONDS.value)
  process.send_signal(signal.SIGINT)
  try:
    process.wait(timeout=60)
  except subprocess.TimeoutExpired:
    process.kill()
  chunks = _chunks(logdir)
  chunks.append({'start': start, 'end': time.time()})
  with open(os.path.join(logdir, _CHUNKS), 'w') as f:
    json.dump(chunks, f, indent=1)


_CHUNKS = 'benchmark_chunks.json'  # [{start, end}] of each training chunk.


def _chunks(logdir: str) -> list:
  path = os.path.join(logdir, _CHUNKS)
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return json.load(f)


def training_seconds(logdir: str):
  """wall time -> training seconds: the time since the first chunk began,
  less the gaps between chunks (a run resumed on the same --out directory
  continues the same curve). Without a chunk record: since config.json."""
  chunks = _chunks(logdir)
  if not chunks:
    start = os.path.getmtime(os.path.join(logdir, 'config.json'))
    return lambda t: t - start

  def seconds(t):
    done = 0.0
    for chunk in chunks:
      if t <= chunk['end']:
        return done + max(0.0, t - chunk['start'])
      done += chunk['end'] - chunk['start']
    return done
  return seconds


def league_curve(logdir: str, game):
  """[(seconds, step, exploitability of the snapshot, of the average)]."""
  # pylint: disable=g-import-not-at-top
  import dataclasses
  import numpy as np
  from repertory import experiment as experiment_lib
  from repertory.agents import neurd
  from repertory.agents.neurd import acting
  from repertory.agents.neurd import learning
  from repertory.components import league as league_lib
  from repertory.components.league import storage
  from repertory.environments.multiagent import openspiel_policy as op
  # pylint: enable=g-import-not-at-top
  with open(os.path.join(logdir, 'config.json')) as f:
    saved = json.load(f)['agent']
  fields = {f.name for f in dataclasses.fields(neurd.Config)}
  config = neurd.Config(**{k: tuple(v) if isinstance(v, list) else v
                           for k, v in saved.items() if k in fields})
  env = f'openspiel:{_GAME.value}'
  spec = experiment_lib.environment_spec(
      lambda seed=None: league_lib.against_random(env, seed or 0))
  template = learning.NeuRD(config, spec, None, '').policy_variables()
  weights = storage.WeightStore(os.path.join(logdir, 'league', 'weights'))
  with open(os.path.join(logdir, 'league', 'league.json')) as f:
    players = json.load(f)['players']
  seconds = training_seconds(logdir)
  curve, pool = [], []
  for player in players:
    policy = acting.LegalPolicy(int(spec.actions.num_values), 0.0,
                                activation=config.activation)
    policy.set_weights(weights.load(player['id'], template)['policy'])
    probabilities = lambda obs, legal, p=policy: np.exp(  # pylint: disable=g-long-lambda
        p.behaviour_log_probs(np.concatenate([obs, legal], axis=-1)))
    table = op.tabular_policy(game, probabilities)
    pool.append(table)
    curve.append({
        'seconds': seconds(player.get('time', 0.0)), 'step': player['step'],
        'snapshot': op.exploitability(game, table),
        'average': op.exploitability(game, op.average_policy(game, pool)),
    })
    print(curve[-1], flush=True)
  return curve


def cfr_curve(game, seconds: float):
  import pyspiel  # pylint: disable=g-import-not-at-top
  solver = pyspiel.CFRSolver(game)
  spent, iterations, next_eval, curve = 0.0, 0, 1, []
  while spent < seconds:
    begin = time.perf_counter()
    solver.evaluate_and_update_policy()
    spent += time.perf_counter() - begin
    iterations += 1
    if iterations >= next_eval:
      next_eval = int(next_eval * 1.5) + 1
      curve.append({'seconds': spent, 'iterations': iterations,
                    'exploitability': pyspiel.exploitability(
                        game, solver.average_policy())})
  curve.append({'seconds': spent, 'iterations': iterations,
                'exploitability': pyspiel.exploitability(
                    game, solver.average_policy())})
  return curve


def main(argv):
  del argv
  if _REPLOT.value:  # Only draw an earlier run's exploitability.json.
    with open(os.path.join(_OUT.value, 'exploitability.json')) as f:
      plot(json.load(f), _FIGURE.value)
    return
  import pyspiel  # pylint: disable=g-import-not-at-top
  game = pyspiel.load_game(_GAME.value)
  logdir = os.path.abspath(_OUT.value)
  if _RESUME.value:
    train(logdir)
  league = league_curve(logdir, game)
  seconds = max(p['seconds'] for p in league) if league else _SECONDS.value
  if _CFR_SECONDS.value is not None:
    seconds = min(seconds, _CFR_SECONDS.value)
  cfr = cfr_curve(game, seconds) if _CFR.value else [{}]
  with open(os.path.join(logdir, 'progress.csv')) as f:
    header, *rows = [line.strip().split(',') for line in f if line.strip()]
  last = dict(zip(header, rows[-1])) if rows else {}
  result = {'game': _GAME.value, 'matchmaking': _MATCHMAKING.value,
            'train_seconds': sum(c['end'] - c['start'] for c in
                                 _chunks(logdir)) or _SECONDS.value,
            'chunks': _chunks(logdir), 'league': league, 'cfr': cfr,
            'actor_steps_per_second': float(last.get(
                'actor_steps_per_second') or 'nan'),
            'loadavg': open('/proc/loadavg').read().split()[:3]}
  counts = json.load(open(os.path.join(logdir, 'counts.json')))
  result['counts'] = counts
  with open(os.path.join(logdir, 'exploitability.json'), 'w') as f:
    json.dump(result, f, indent=1)
  best = min(league, key=lambda p: min(p['snapshot'], p['average']))
  print(json.dumps({
      'final_snapshot': league[-1]['snapshot'], 'final_average':
      league[-1]['average'], 'best': best, 'cfr_final': cfr[-1],
      'counts': counts, 'actor_steps_per_second':
      result['actor_steps_per_second']}, indent=1))
  if _FIGURE.value:
    plot(result, _FIGURE.value)


def plot(result: dict, path: str) -> None:
  """Draws the curves of one `exploitability.json`."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  league, cfr = result['league'], [p for p in result['cfr'] if p]
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.plot([p['seconds'] for p in league], [p['snapshot'] for p in league],
          label=f'neurd ({result["matchmaking"]}): each snapshot',
          alpha=0.5)
  ax.plot([p['seconds'] for p in league], [p['average'] for p in league],
          label='neurd: average of the pool so far')
  if cfr:
    ax.plot([p['seconds'] for p in cfr], [p['exploitability'] for p in cfr],
            label='OpenSpiel CFR (C++), average policy')
  ax.set_xlabel('wall seconds')
  ax.set_ylabel('exploitability')
  ax.set_yscale('log')
  ax.set_title(f'{result["game"]}: exploitability over wall time')
  ax.grid(True, which='both', alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)


if __name__ == '__main__':
  app.run(main)
