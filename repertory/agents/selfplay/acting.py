"""Self-play actors: many games side by side, each against an opponent the
league picked for that episode.

Per game: the league's `sample_opponents` gives (opponent id, version) and
the actor takes a seat at random. Against a frozen snapshot the actor's
seat plays the learner's latest weights and only that seat's trajectory is
written; against the live learner itself (naive self-play) every seat
plays and learns. Opponent weights are fetched from the league once per
snapshot id (`MLPPolicy`, numpy: one call per distinct policy per step over
all games that need it).

With `server` (`--config.inference=server`, SEED-style) the actor
evaluates no policy: each step it sends every game's acting player's view
and that player's policy id ('' for the learner, else the opponent
snapshot's id) to the `InferenceServer` in ONE call, which plays the
learner and every opponent snapshot and returns actions, log-probabilities
and the versions that chose them.

With `policy_loss='ppo'` the actor plays synchronous rounds (PPO's): it
waits for the learner's next version, then plays games with exactly those
weights until `batch_size` learning seats' trajectories are written (the
last games learn with fewer seats if the round wants fewer), flushes them
to the queue and waits for the next version; no step of a round is taken
with another version.

With `use_lstm` every player (learning seats and opponents' snapshots, the
same IMPALA LSTM network) carries its core state across its own turns of a
game, zeroed when the game starts; each learning seat's items store the
state it had at their first step.

Each learning seat writes ITS OWN trajectory through a `SequenceAdder`
(items of T + 1 steps every T of its moves, T = `unroll_length` or
`max_player_steps`, zero padded at the end of a game; by default one item
per game): its
observations at its own turns, its actions and their log-probabilities, the
rewards it received between its turns, and the policy version. Finished
games go to the league (payoffs, Elo), to the run monitor (the learning
seat's return) and, one line per game, to `<logdir>/games/actor_<i>.csv`
(opponent id and version, seat, learner version, return, score).
"""

import collections
import os
from typing import Any, Dict, List, Optional, Tuple

import dm_env
import numpy as np

from repertory import core
from repertory import environments
from repertory import launch
from repertory.agents.selfplay import config as config_lib
from repertory.components import adders
from repertory.agents.actor_critic import lstm_policy
from repertory.components import league as league_lib
from repertory.agents.actor_critic import rounds
from repertory.components import variables
from repertory.components.evaluation import episodes
from repertory.environments import multiagent

_MAX_CACHED_OPPONENTS = 64
_LEARNER = '<learner>'


def core_state_spec(config: config_lib.Config) -> Optional[Dict[str, Any]]:
  """One seat's stored core state (numpy examples), or None (no LSTM)."""
  if not config.use_lstm:
    return None
  zeros = np.zeros((config.lstm_size,), np.float32)
  return {'hidden': zeros, 'cell': zeros.copy()}


class _Seat:
  """One learning seat of one game: its adder and what it owes the adder."""

  def __init__(self, adder):
    self.adder = adder
    self.action = None      # The seat's last action, not yet added.
    self.log_prob = None
    self.core_state = None  # The LSTM state it chose that action with.
    self.reward = 0.0       # Its rewards since its last turn.

  def act(self, view, action, log_prob, version, core_state=None) -> None:
    step = (dm_env.StepType.FIRST if self.action is None
            else dm_env.StepType.MID)
    self._add(step, view, 1.0)
    self.adder.set_policy_version(version)
    self.action, self.log_prob = action, log_prob
    self.core_state = core_state

  def end(self, view) -> None:
    if self.action is not None:
      self._add(dm_env.StepType.LAST, view, 0.0)
    self.action, self.reward = None, 0.0

  def _add(self, step_type, view, discount) -> None:
    if step_type == dm_env.StepType.FIRST:
      self.adder.add_first(dm_env.TimeStep(step_type, None, None, view))
    else:
      self.adder.add(np.int32(self.action), dm_env.TimeStep(
          step_type, np.float32(self.reward), np.float32(discount), view),
          extras={'log_prob': np.float32(self.log_prob)},
          core_state=self.core_state)
    self.reward = 0.0


class SelfPlayActor(core.Worker):
  """Plays `num_games` games side by side until the program stops (one
  policy call per distinct policy and step over all of them).

  `role` is the learner it plays for ('main', or an exploiter 'exploiter0',
  ...: then `learner` is that exploiter's learner, its trajectories go to
  its own queue and its games to `games/exploiter0_actor_<i>.csv`).
  """

  def __init__(self, config: config_lib.Config, env: Any, num_games: int,
               max_player_steps: int, actor_id: int, seed: int, learner: Any,
               league: Any,
               replay: Any, counter: Any = None, monitor: Any = None,
               logdir: Optional[str] = None, role: str = config_lib.MAIN,
               server: Any = None):
    self._config, self._league, self._role = config, league, role
    self._server = server  # SEED-style: the inference server plays.
    self._channel = None
    self._actor_id = actor_id
    self._rng = np.random.default_rng(seed)
    self._games = [environments.make(env, seed=seed + i)
                   for i in range(num_games)]
    if not isinstance(self._games[0], multiagent.MultiAgentEnvironment):
      raise ValueError(f'The selfplay agent plays N-player games '
                       f'(openspiel:..., pettingzoo:...); {env!r} is a '
                       'single-agent environment.')
    self._n = self._games[0].num_players
    steps = config_lib.unroll_steps(config, max_player_steps)
    self._seats = [[_Seat(adders.SequenceAdder(
        replay, config_lib.table_name(role), steps + 1, period=steps,
        end_of_episode_behavior=adders.EndBehavior.ZERO_PAD,
        actor_id=actor_id)) for _ in range(self._n)] for _ in self._games]
    self._client = None if server is not None else variables.VariableClient(
        learner, config_lib.POLICY,
        update_period=config.variable_update_period)
    self._source = learner
    self._lstm = None  # use_lstm: the learner's and the opponents' policies.
    if config.use_lstm:
      self._lstm = {_LEARNER: lstm_policy.LSTMPolicy(config.lstm_size),
                    'opponent': lstm_policy.LSTMPolicy(config.lstm_size)}
      self._lstm_opponent = None  # Whose weights 'opponent' holds.
      shape = (len(self._games), self._n, config.lstm_size)
      self._hidden = np.zeros(shape, np.float32)  # Per game and player.
      self._cell = np.zeros(shape, np.float32)
    # 'ppo': synchronous rounds. The trajectories the round still wants
    # (None: asynchronous acting) and the version of the last round.
    self._round_left: Optional[int] = (
        0 if config.policy_loss == 'ppo' and server is None else None)
    self._round_version: Optional[int] = None
    self._run_id = np.int64(int.from_bytes(os.urandom(7), 'little'))
    self._learner_version = 0
    self._opponent_cache: 'collections.OrderedDict[str, Any]' = (
        collections.OrderedDict())
    self._queue: List[Tuple[str, int]] = []  # Sampled opponents, unused.
    self._reporter = episodes.ActorReporter(counter, monitor,
                                            min_interval_s=0.5)
    self._counter = counter
    self._results: List[Tuple[str, str, float]] = []
    self._log = None
    if logdir:
      os.makedirs(os.path.join(logdir, 'games'), exist_ok=True)
      prefix = '' if role == config_lib.MAIN else f'{role}_'
      path = os.path.join(logdir, 'games', f'{prefix}actor_{actor_id}.csv')
      new = not os.path.exists(path)
      self._log = open(path, 'a', buffering=1 << 16)  # pylint: disable=consider-using-with
      if new:
        self._log.write('opponent,opponent_version,seat,learner_version,'
                        'return,score\n')
    # Per game: timestep, opponent (id, version), the learner's seats.
    self._timesteps: List[Optional[dm_env.TimeStep]] = [None] * len(self._games)
    self._opponents: List[Tuple[str, int]] = [('', 0)] * len(self._games)
    self._learning: List[List[int]] = [[] for _ in self._games]
    self._versions = [0] * len(self._games)
    self._totals = [np.zeros(self._n) for _ in self._games]
    self.steps = 0
    self.games_played = 0

  # --- opponents ---------------------------------------------------------------

  def _next_opponent(self) -> Tuple[str, int]:
    if not self._queue:
      self._queue = list(self._league.sample_opponents(
          self._role, len(self._games)))[::-1]
    return self._queue.pop()

  def _opponent_policy(self, opponent: str) -> Any:
    policy = self._opponent_cache.get(opponent)
    if policy is None:
      _, weights = self._league.get_weights(opponent)
      policy = (weights if self._lstm is not None
                else league_lib.MLPPolicy(weights))
      self._opponent_cache[opponent] = policy
      if len(self._opponent_cache) > _MAX_CACHED_OPPONENTS:
        self._opponent_cache.popitem(last=False)
    else:
      self._opponent_cache.move_to_end(opponent)
    return policy

  def _start(self, i: int) -> None:
    """Starts game `i` (in a round: only while the round wants trajectories;
    else game `i` idles until the next round)."""
    if self._round_left is not None and self._round_left <= 0:
      self._timesteps[i] = None
      return
    opponent = self._next_opponent()
    self._opponents[i] = opponent
    if opponent[1] == league_lib.LIVE_VERSION:  # Itself: every seat learns.
      self._learning[i] = list(range(self._n))
    else:
      self._learning[i] = [int(self._rng.integers(self._n))]
      if self._server is None:
        self._opponent_policy(opponent[0])  # Fetched before the game starts.
    if self._round_left is not None:  # No more seats than the round wants.
      if len(self._learning[i]) > self._round_left:
        self._learning[i] = sorted(int(p) for p in self._rng.choice(
            self._learning[i], self._round_left, replace=False))
      self._round_left -= len(self._learning[i])
    self._versions[i] = self._learner_version
    self._totals[i] = np.zeros(self._n)
    if self._lstm is not None:  # Every player starts the game afresh.
      self._hidden[i] = 0.0
      self._cell[i] = 0.0
    self._timesteps[i] = self._games[i].reset()

  # --- the loop ----------------------------------------------------------------

  def run(self, num_steps: Optional[int] = None) -> None:
    """Plays until the program stops (or for `num_steps` more steps; in
    synchronous rounds, whole rounds until that many more steps)."""
    stop = launch.stop_event() if num_steps is None else None
    try:
      if self._round_left is not None:
        end = None if num_steps is None else self.steps + num_steps
        while (stop is None or not stop.is_set()) and (end is None or
                                                       self.steps < end):
          if self.wait_for_round(stop) is None:
            break
          self.play_round()
        return
      if self._server is None:
        self._client.update(wait=True)
        self._learner = self._learner_policy(self._client.params)
        self._learner_version = self._client.version
      else:
        self._channel = launch.ChannelClient(self._server.channel_address())
      for i, timestep in enumerate(self._timesteps):
        if timestep is None:
          self._start(i)
      end = None if num_steps is None else self.steps + num_steps
      while (stop is None or not stop.is_set()) and (end is None or
                                                     self.steps < end):
        self._step()
    except Exception:  # pylint: disable=broad-except
      if stop is None or not stop.is_set():
        raise  # Reverb or the learner going away while stopping is expected.
    finally:
      if num_steps is None:
        self.close()
      else:
        self._flush_reports()

  # --- synchronous rounds ('ppo') ------------------------------------------------

  def wait_for_round(self, stop: Any = None) -> Optional[int]:
    """Waits for the learner's next version (the first round: its current
    one) and holds its weights; returns that version, or None on `stop`."""
    if self._round_version is not None and rounds.wait_for_version(
        self._source, self._round_version + 1, stop,
        self._config.round_timeout_s,
        f'Self-play actor {self._actor_id} ({self._role})') is None:
      return None
    self._client.update(wait=True)
    self._learner = self._learner_policy(self._client.params)
    self._learner_version = self._round_version = self._client.version
    return self._learner_version

  def play_round(self) -> int:
    """Plays games with the held weights until exactly `batch_size` learning
    seats' trajectories are written (and on the queue); returns them."""
    self._round_left = self._config.batch_size
    for i in range(len(self._games)):
      self._start(i)
    while any(t is not None for t in self._timesteps):
      self._step()
    for seats in self._seats:
      for seat in seats:
        seat.adder.flush()
    self._flush_reports()
    return self._config.batch_size

  # --- the loop ----------------------------------------------------------------

  def _step(self) -> None:
    """One move in every game being played: one policy call per distinct
    policy (or one call to the inference server)."""
    # (game, player, policy key, whether the seat learns)
    rows: List[Tuple[int, int, str, bool]] = []
    active = [i for i, t in enumerate(self._timesteps) if t is not None]
    for i in active:
      timestep = self._timesteps[i]
      current = int(timestep.observation[multiagent.CURRENT_PLAYER])
      players = range(self._n) if current == multiagent.SIMULTANEOUS else [
          current]
      live = self._opponents[i][1] == league_lib.LIVE_VERSION
      for p in players:
        learns = p in self._learning[i]
        rows.append((i, p, _LEARNER if learns or live
                     else self._opponents[i][0], learns))
    choose = self._choose_locally if self._server is None else self._serve
    chosen, log_probs, versions, states = choose(rows)
    actions = np.zeros((len(self._games), self._n), np.int64)
    for (i, p, _, learns), action, log_prob, version, state in zip(
        rows, chosen, log_probs, versions, states):
      actions[i, p] = action
      if learns:
        self._seats[i][p].act(multiagent.player_view(self._timesteps[i], p),
                              action, log_prob, version, state)
    for i in active:
      game = self._games[i]
      timestep = game.step(actions[i])
      self._totals[i] += timestep.reward
      for p in self._learning[i]:
        self._seats[i][p].reward += float(timestep.reward[p])
      self._timesteps[i] = timestep
      if timestep.last():
        self._finish(i)
    self.steps += len(active)
    self._reporter.report(len(active), [], [])
    if self._client is not None and self._round_left is None:
      self._client.update()
      if self._client.version != self._learner_version:
        self._learner = self._learner_policy(self._client.params)
        self._learner_version = self._client.version

  def _learner_policy(self, params) -> Any:
    if self._lstm is None:
      return league_lib.MLPPolicy(params)
    self._lstm[_LEARNER].set_weights(params)
    return self._lstm[_LEARNER]

  def _recurrent_policy(self, key: str) -> Any:
    """The LSTM policy of `key` (the learner or a snapshot's weights)."""
    if key == _LEARNER:
      return self._lstm[_LEARNER]
    weights = self._opponent_policy(key)
    if self._lstm_opponent != key:
      self._lstm['opponent'].set_weights(weights)
      self._lstm_opponent = key
    return self._lstm['opponent']

  def _choose_locally(self, rows):
    """(actions, log-probs, versions, core states used) per row, one call
    per policy (the core states: None without an LSTM)."""
    chosen = np.zeros(len(rows), np.int64)
    log_probs = np.zeros(len(rows), np.float32)
    states = [None] * len(rows)
    groups: Dict[str, List[int]] = collections.defaultdict(list)
    for k, (_, _, key, _) in enumerate(rows):
      groups[key].append(k)
    for key, ks in groups.items():
      obs = np.stack([self._timesteps[rows[k][0]].observation['observation'][
          rows[k][1]] for k in ks])
      legal = np.stack([self._timesteps[rows[k][0]].observation[
          'legal_actions'][rows[k][1]] for k in ks])
      epsilon = self._config.exploration if key == _LEARNER else 0.0
      if self._lstm is None:
        policy = (self._learner if key == _LEARNER
                  else self._opponent_policy(key))
        chosen[ks], log_probs[ks] = policy.act(obs, legal, self._rng,
                                               epsilon=epsilon)
        continue
      games = [rows[k][0] for k in ks]
      players = [rows[k][1] for k in ks]
      hidden = self._hidden[games, players]  # [K, lstm] (copies)
      cell = self._cell[games, players]
      chosen[ks], log_probs[ks], state = self._recurrent_policy(key).act(
          obs, legal, lstm_policy.LSTMPolicy.state(hidden, cell), self._rng,
          epsilon=epsilon)
      self._hidden[games, players] = state.hidden
      self._cell[games, players] = state.cell
      for j, k in enumerate(ks):
        states[k] = {'hidden': hidden[j], 'cell': cell[j]}
    return chosen, log_probs, [self._learner_version] * len(rows), states

  def _serve(self, rows):
    """(actions, log-probs, versions, no core states) per row from the
    inference server: one call with every game's acting player (turn-based
    games; stateless policies)."""
    if len(rows) != len(self._games):
      raise ValueError('Self-play on an inference server plays turn-based '
                       'games (one acting player per game).')
    view = lambda i, p, name: self._timesteps[i].observation[name][p]  # pylint: disable=g-long-lambda
    step_type = np.array([self._timesteps[i].step_type for i, _, _, _ in rows],
                         np.int8)
    zeros = np.zeros(len(rows), np.float32)
    observation = {
        'observation': np.stack([view(i, p, 'observation')
                                 for i, p, _, _ in rows]),
        'legal_actions': np.stack([view(i, p, 'legal_actions')
                                   for i, p, _, _ in rows])}
    opponent = np.array(['' if key == _LEARNER else key
                         for _, _, key, _ in rows])
    actions, extras = self._channel.call(
        np.int64(self._actor_id), self._run_id, step_type, zeros, zeros,
        observation, opponent)
    versions = extras['policy_version']
    learner = opponent == ''
    if learner.any():
      self._learner_version = int(versions[learner].max())
    return (actions, extras['log_prob'], versions.tolist(),
            [None] * len(rows))

  def _finish(self, i: int) -> None:
    timestep = self._timesteps[i]
    for p in self._learning[i]:
      if self._round_left is not None and self._seats[i][p].action is None:
        self._round_left += 1  # The seat never acted: it writes nothing.
      self._seats[i][p].end(multiagent.player_view(timestep, p))
    opponent, version = self._opponents[i]
    totals = self._totals[i]
    if version == league_lib.LIVE_VERSION:
      seat = 0
      self._results.append((self._role, self._role, 0.5))
    else:
      seat = self._learning[i][0]
      others = np.delete(totals, seat)
      score = league_lib.score_from_returns(totals[seat], float(np.max(others)))
      self._results.append((self._role, opponent, score))
      self._reporter.report(0, [float(totals[seat])], [])
    if self._log is not None:
      score = self._results[-1][2]
      self._log.write(f'{opponent},{version},{seat},{self._versions[i]},'
                      f'{totals[seat]:g},{score:g}\n')
    self.games_played += 1
    if len(self._results) >= self._config.report_every_games:
      self._flush_reports()
    self._start(i)

  def _flush_reports(self) -> None:
    if self._results:
      self._league.futures.report(self._results)
      if self._counter is not None:
        self._counter.futures.increment(games=len(self._results))
      self._results = []
    self._reporter.flush()

  def flush(self) -> None:
    """Sends every written item to the queue and every finished game to the
    league."""
    for seats in self._seats:
      for seat in seats:
        seat.adder.flush()
    self._flush_reports()

  def close(self) -> None:
    self._flush_reports()
    if self._log is not None:
      self._log.close()
    if self._client is not None:
      self._client.close()
    if self._channel is not None:
      self._channel.close()
    for game in self._games:
      game.close()
