r"""Plays two players against each other in an N-player game and prints the
results table: saved policies, OpenSpiel's bots, or a random player.

  python -m repertory.play --env=openspiel:connect_four \
      --players=run:runs/selfplay-c4,mcts:100 --games=200

  python -m repertory.play --env=openspiel:tic_tac_toe \
      --players=human,run:runs/selfplay-ttt --games=1   # you play it

Player specs:
  human               you, at the terminal: the game and the legal moves
                      are shown, you type a move (its number or name)
  random              uniformly random legal moves
  mcts:<simulations>  OpenSpiel's MCTS bot (random rollouts; OpenSpiel games)
  run:<logdir>        the latest learner checkpoint of a selfplay run
  run:<logdir>@<id>   a league snapshot of that run, e.g. run:runs/x@main@v400
  pool:<logdir>       the league pool's average policy of a run (--league or
                      selfplay): each game, one snapshot of the pool picked
                      uniformly plays it through (the mixed strategy whose
                      behaviour policy is the pool's average)
  ckpt:<path>         a checkpoint of a policy network (`ckpt-N` prefix): an
                      MLP (relu; a run's players use its config's
                      activation), or IMPALA's LSTM (`--config.use_lstm`),
                      whose state runs through each game
  search:<simulations>:<run:... or ckpt:...>
                      that network searching: OpenSpiel's MCTS with the
                      network's priors and values (AlphaZero's PUCT) in place
                      of random rollouts, e.g. search:100:run:runs/x; two-
                      player zero-sum OpenSpiel games

Each player plays `--games` games in every seat (first and second for two
players); the table gives the first player's wins, draws, losses and mean
return per seating.

`--export=<path>` plays nothing: it writes the first player's policy (a
`run:`, `pool:` or `ckpt:` MLP policy) as a tabular OpenSpiel policy, JSON
{"game", "exploitability", "policy": {information state: action
probabilities}}, for two-player zero-sum games small enough to traverse
(Kuhn poker, Leduc poker):

  python -m repertory.play --env=openspiel:kuhn_poker \
      --players=pool:runs/kuhn --export=runs/kuhn/pool_policy.json
"""

import json
import os
from typing import Any, Callable, Dict, List

from absl import app
from absl import flags
import numpy as np

from repertory import saved_policies


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
  flags.DEFINE_string('export', None, "Write the first player's policy as "
                      'a tabular OpenSpiel policy (JSON) here instead of '
                      'playing (see the module docstring).')

# player(env, timestep, player index) -> action
Player = Callable[[Any, Any, int], int]


def make_player(spec: str, env: Any, seed: int, greedy: bool) -> Player:
  """A player from its spec (see the module docstring)."""
  rng = np.random.default_rng(seed)
  kind, _, rest = spec.partition(':')
  if kind == 'human':
    from repertory import human_player  # pylint: disable=g-import-not-at-top
    return human_player.HumanPlayer()
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
  activation = saved_policies.activation(spec)
  if kind == 'pool':
    return _PoolPlayer([_mlp_player(w, rng, greedy, activation)
                        for w in saved_policies.pool_weights(rest)], rng)
  if kind in ('run', 'ckpt'):
    weights = saved_policies.network_weights(spec)
    if 'core/lstm/w_h' in weights:  # IMPALA's LSTM (--config.use_lstm).
      return _LSTMPlayer(weights, env, rng, greedy)
    return _mlp_player(weights, rng, greedy, activation)
  raise ValueError(f'Unknown player spec {spec!r}; expected human, random, '
                   'mcts:<simulations>, run:<logdir>[@<snapshot>], '
                   'pool:<logdir>, ckpt:<path> or '
                   'search:<simulations>:<run:... or ckpt:...>.')


def _mlp_player(weights: Dict[str, np.ndarray], rng: np.random.Generator,
                greedy: bool, activation: str) -> Player:
  """An MLP policy's player, on the view its network was trained on."""
  from repertory.components import league  # pylint: disable=g-import-not-at-top
  from repertory.components.league import exploitability  # pylint: disable=g-import-not-at-top
  policy = league.MLPPolicy(weights, activation)

  def act(env_, timestep, p):
    del env_
    obs = timestep.observation
    legal = np.asarray(obs['legal_actions'][p], np.float32)[None]
    action, _ = policy.act(exploitability.network_input(
        weights, np.asarray(obs['observation'][p])[None], legal), legal,
                           rng, greedy)
    return int(action[0])
  return act


class _PoolPlayer:
  """The pool's average policy: one snapshot, picked uniformly per game,
  plays the whole game."""

  def __init__(self, players: List[Player], rng: np.random.Generator):
    self._players, self._rng = players, rng
    self._current = players[0]

  def new_game(self) -> None:
    self._current = self._players[int(self._rng.integers(len(self._players)))]

  def __call__(self, env_, timestep, p) -> int:
    return self._current(env_, timestep, p)


def export_table(spec: str, env_spec: str, path: str) -> float:
  """Writes player `spec`'s policy (run:, pool: or ckpt: MLP weights) on
  game `env_spec` as a tabular OpenSpiel policy in JSON; returns its
  exploitability."""
  from repertory.components.league import exploitability  # pylint: disable=g-import-not-at-top
  kind, _, rest = spec.partition(':')
  if kind not in ('run', 'pool', 'ckpt'):
    raise ValueError(f'--export writes run:, pool: or ckpt: players; got '
                     f'{spec!r}.')
  metric = exploitability.Exploitability(
      env_spec, activation=saved_policies.activation(spec))
  try:
    pool = (saved_policies.pool_weights(rest) if kind == 'pool' else
            [saved_policies.network_weights(spec)])
    for i, weights in enumerate(pool):
      metric.add(str(i), {'policy': weights})
    table = metric.average()
    value = metric.exploitability(table)
  finally:
    metric.close()
  probabilities = {
      state: [float(p) for p in table.action_probability_array[index]]
      for state, index in table.state_lookup.items()}
  with open(path + '.tmp', 'w') as f:
    json.dump({'game': env_spec, 'player': spec, 'exploitability': value,
               'policy': probabilities}, f, indent=1, sort_keys=True)
  os.replace(path + '.tmp', path)
  return value


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
  policy = league.MLPPolicy(saved_policies.network_weights(network),
                            saved_policies.activation(network))
  bot = search.network_bot(
      env.game, search.NetworkEvaluator(policy.policy_value, env.observe),
      int(simulations), seed=seed)
  return lambda env_, timestep, p: int(bot.step(env_.state))


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
      saved_policies.check_run_env(spec, FLAGS.env)
    if FLAGS.export:
      value = export_table(FLAGS.players[0], FLAGS.env, FLAGS.export)
      print(f'{FLAGS.players[0]}: exploitability {value:.4f} on '
            f'{FLAGS.env}; wrote {FLAGS.export}')
      return
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
