r"""Plays two players against each other in an N-player game and prints the
results table: saved policies, OpenSpiel's bots, or a random player.

  python -m repertory.play --env=openspiel:connect_four \
      --players=run:runs/selfplay-c4,mcts:100 --games=200

Player specs:
  random              uniformly random legal moves
  mcts:<simulations>  OpenSpiel's MCTS bot (random rollouts; OpenSpiel games)
  run:<logdir>        the latest learner checkpoint of a selfplay run
  run:<logdir>@<id>   a league snapshot of that run, e.g. run:runs/x@main@v400
  ckpt:<path>         a checkpoint of a policy network (`ckpt-N` prefix): an
                      MLP, or IMPALA's LSTM (`--config.use_lstm`), whose state
                      runs through each game
  search:<simulations>:<run:... or ckpt:...>
                      that network searching: OpenSpiel's MCTS with the
                      network's priors and values (AlphaZero's PUCT) in place
                      of random rollouts, e.g. search:100:run:runs/x; two-
                      player zero-sum OpenSpiel games

Each player plays `--games` games in every seat (first and second for two
players); the table gives the first player's wins, draws, losses and mean
return per seating.
"""

import glob
import json
import os
import re
from typing import Any, Callable, Dict, List

from absl import app
from absl import flags
import numpy as np


def define_flags() -> None:
  """The command line's flags (defined when run as a command, so that
  importing this module beside `repertory.run`, whose `--env` and `--seed`
  differ, defines nothing)."""
  flags.DEFINE_string('env', 'openspiel:kuhn_poker', 'An N-player game '
                      'spec (openspiel:<game>, pettingzoo:<module>).')
  flags.DEFINE_list('players', ['random', 'random'],
                    'Two player specs (see the module docstring).')
  flags.DEFINE_integer('games', 100, 'Games per seating.')
  flags.DEFINE_integer('seed', 0, 'Random seed.')
  flags.DEFINE_bool('greedy', False, 'Saved policies play their most '
                    'likely legal move instead of sampling.')
  flags.DEFINE_string('json', None, 'Also write the table as JSON here.')

# player(env, timestep, player index) -> action
Player = Callable[[Any, Any, int], int]


def _checkpoint_weights(prefix: str) -> Dict[str, np.ndarray]:
  """The network's variables in a checkpoint, named as
  `networks.get_variables` names them (attribute paths without '_')."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(prefix)
  weights = {}
  for key in reader.get_variable_to_shape_map():
    match = re.fullmatch(r'network/(.*)/\.ATTRIBUTES/VARIABLE_VALUE', key)
    if match:
      name = '/'.join(p.lstrip('_') for p in match.group(1).split('/'))
      weights[name] = reader.get_tensor(key)
  if not weights:
    raise ValueError(f'Checkpoint {prefix!r} holds no network variables.')
  return weights


def _run_checkpoint(spec: str) -> str:
  logdir, _, snapshot = spec.partition('@')
  if not os.path.isdir(logdir):
    raise ValueError(f'Player {"run:" + spec!r}: no run directory {logdir!r}.')
  if snapshot:
    tagged = glob.glob(os.path.join(logdir, 'league', 'snapshots', 'tags',
                                    snapshot, 'ckpt-*.index'))
    if not tagged:
      with open(os.path.join(logdir, 'league', 'league.json')) as f:
        ids = [p['id'] for p in json.load(f)['players']]
      raise ValueError(f'Run {logdir!r} has no league snapshot {snapshot!r}; '
                       f'snapshots: {", ".join(ids)}.')
    return tagged[0][:-len('.index')]
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  prefix = tf.train.latest_checkpoint(
      os.path.join(logdir, 'checkpoints', 'latest'))
  if prefix is None:
    raise ValueError(f'Run {logdir!r} has no learner checkpoint yet.')
  return prefix


def make_player(spec: str, env: Any, seed: int, greedy: bool) -> Player:
  """A player from its spec (see the module docstring)."""
  rng = np.random.default_rng(seed)
  kind, _, rest = spec.partition(':')
  if kind == 'random':
    return lambda env_, timestep, p: int(rng.choice(np.flatnonzero(
        timestep.observation['legal_actions'][p])))
  if kind == 'mcts':
    if not rest.isdigit() or not hasattr(env, 'game'):
      raise ValueError(f'Player {spec!r}: write mcts:<simulations> (e.g. '
                       'mcts:100), for openspiel: games.')
    from open_spiel.python.algorithms import mcts  # pylint: disable=g-import-not-at-top
    random_state = np.random.RandomState(seed)
    bot = mcts.MCTSBot(env.game, 2.0, int(rest),
                       mcts.RandomRolloutEvaluator(1, random_state),
                       random_state=random_state, solve=True)
    return lambda env_, timestep, p: int(bot.step(env_.state))
  if kind == 'search':
    return _search_player(spec, env, seed)
  if kind in ('run', 'ckpt'):
    from repertory.components import league  # pylint: disable=g-import-not-at-top
    weights = _network_weights(spec)
    if 'core/lstm/w_h' in weights:  # IMPALA's LSTM (--config.use_lstm).
      return _LSTMPlayer(weights, env, rng, greedy)
    policy = league.MLPPolicy(weights)

    def act(env_, timestep, p):
      del env_
      obs = timestep.observation
      action, _ = policy.act(obs['observation'][p][None],
                             obs['legal_actions'][p][None], rng, greedy)
      return int(action[0])
    return act
  raise ValueError(f'Unknown player spec {spec!r}; expected random, '
                   'mcts:<simulations>, run:<logdir>[@<snapshot>], '
                   'ckpt:<path> or search:<simulations>:<run:... or ckpt:...>.')


def _network_weights(spec: str) -> Dict[str, np.ndarray]:
  """The weights of a `run:` or `ckpt:` player."""
  kind, _, rest = spec.partition(':')
  return _checkpoint_weights(_run_checkpoint(rest) if kind == 'run' else rest)


def _search_player(spec: str, env: Any, seed: int) -> Player:
  """`search:<simulations>:<network spec>`: the network guiding
  OpenSpiel's MCTS (`components.search`)."""
  simulations, _, network = spec[len('search:'):].partition(':')
  if (not simulations.isdigit() or int(simulations) < 1 or
      network.partition(':')[0] not in ('run', 'ckpt')):
    raise ValueError(f'Player {spec!r}: write search:<simulations>:<run:... '
                     'or ckpt:...>, e.g. search:100:run:runs/c4.')
  if not hasattr(env, 'observe'):
    raise ValueError(f'Player {spec!r} searches OpenSpiel games only.')
  from repertory.components import league  # pylint: disable=g-import-not-at-top
  from repertory.components import search  # pylint: disable=g-import-not-at-top
  search.check_game(env.game)
  policy = league.MLPPolicy(_network_weights(network))
  bot = search.network_bot(
      env.game, search.NetworkEvaluator(policy.policy_value, env.observe),
      int(simulations), seed=seed)
  return lambda env_, timestep, p: int(bot.step(env_.state))


def check_run_env(spec: str, env_spec: str) -> None:
  """Refuses a `run:` player (also searching, `search:N:run:...`) trained
  on another game or view (e.g. on 'openspiel:connect_four/relative' and
  played on 'openspiel:connect_four'): its network would read boards it
  never saw."""
  if spec.startswith('search:'):
    spec = spec[len('search:'):].partition(':')[2]
  kind, _, rest = spec.partition(':')
  path = os.path.join(rest.partition('@')[0], 'config.json')
  if kind != 'run' or not os.path.exists(path):
    return
  with open(path) as f:
    trained = json.load(f).get('experiment', {}).get('env')
  if trained is not None and trained != env_spec:
    raise ValueError(f'Player {spec!r} was trained on --env={trained!r}; '
                     f'play it with --env={trained}, not {env_spec!r}.')


class _LSTMPlayer:
  """A recurrent policy's player: its LSTM state runs through each game from
  zero (`new_game`), advancing at its own turns."""

  def __init__(self, weights, env: Any, rng, greedy: bool):
    from repertory.agents.actor_critic import lstm_policy  # pylint: disable=g-import-not-at-top
    del env  # The network's sizes come with its weights.
    self._policy = lstm_policy.LSTMPolicy.from_weights(weights)
    self._rng, self._greedy, self._states = rng, greedy, {}

  def new_game(self) -> None:
    self._states = {}

  def __call__(self, env_, timestep, p) -> int:
    del env_
    obs = timestep.observation
    state = self._states.get(p, self._policy.initial_state(1))
    action, _, self._states[p] = self._policy.act(
        obs['observation'][p][None], obs['legal_actions'][p][None], state,
        self._rng, self._greedy)
    return int(action[0])


def play(env: Any, players: List[Player], games: int) -> List[dict]:
  """`games` games per seating (player i in seat (i + shift) % N); the
  first player's results per seating."""
  n = env.num_players
  if len(players) != n:
    raise ValueError(f'{n} players needed, got {len(players)}.')
  rows = []
  for shift in range(n):
    seat_of = [(i + shift) % n for i in range(n)]
    player_in = {seat: i for i, seat in enumerate(seat_of)}
    wins = draws = losses = 0
    returns = []
    for _ in range(games):
      timestep, total = env.reset(), np.zeros(n)
      for player in players:  # A recurrent player starts afresh.
        getattr(player, 'new_game', lambda: None)()
      while not timestep.last():
        seat = int(timestep.observation['current_player'])
        action = players[player_in[seat]](env, timestep, seat)
        timestep = env.step(action)
        total += timestep.reward
      mine = total[seat_of[0]]
      best_other = np.max(np.delete(total, seat_of[0]))
      wins += mine > best_other
      draws += mine == best_other
      losses += mine < best_other
      returns.append(mine)
    rows.append({'seat': seat_of[0], 'games': games, 'wins': int(wins),
                 'draws': int(draws), 'losses': int(losses),
                 'mean_return': float(np.mean(returns))})
  return rows


def main(argv):
  FLAGS = flags.FLAGS  # pylint: disable=invalid-name
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  from repertory import environments  # pylint: disable=g-import-not-at-top
  from repertory.environments import multiagent  # pylint: disable=g-import-not-at-top
  try:
    env = environments.make(FLAGS.env, seed=FLAGS.seed)
    if not isinstance(env, multiagent.MultiAgentEnvironment) or (
        env.simultaneous):
      raise ValueError(f'--env={FLAGS.env!r} is not a turn-based N-player '
                       'game (openspiel:<game>, pettingzoo:<module>).')
    for spec in FLAGS.players:
      check_run_env(spec, FLAGS.env)
    players = [make_player(spec, env, FLAGS.seed + i, FLAGS.greedy)
               for i, spec in enumerate(FLAGS.players)]
    rows = play(env, players, FLAGS.games)
  except (ValueError, ImportError) as e:
    raise SystemExit(f'repertory.play: error: {e}') from None
  names = FLAGS.players
  print(f'{FLAGS.env}: {names[0]} against {" and ".join(names[1:])}, '
        f'{FLAGS.games} games per seating')
  print(f'{"first player":<34} {"seat":>4} {"games":>6} {"wins":>6} '
        f'{"draws":>6} {"losses":>6} {"win %":>6} {"return":>7}')
  for row in rows:
    print(f'{names[0][:34]:<34} {row["seat"]:>4} {row["games"]:>6} '
          f'{row["wins"]:>6} {row["draws"]:>6} {row["losses"]:>6} '
          f'{100 * row["wins"] / row["games"]:>6.1f} '
          f'{row["mean_return"]:>7.3f}')
  if FLAGS.json:
    with open(FLAGS.json, 'w') as f:
      json.dump({'env': FLAGS.env, 'players': names, 'rows': rows}, f,
                indent=2)


if __name__ == '__main__':
  define_flags()
  app.run(main)
