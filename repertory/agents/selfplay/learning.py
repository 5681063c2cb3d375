"""The self-play learner: the loss of `loss.py` (NeuRD, A2C or MMD with an
action-value critic) or a V-trace/PPO update (`updates.py`) on per-player
trajectories; snapshots offered to the league.

With a no-regret rule like NeuRD, self-play cycles around an equilibrium of
a zero-sum game; the average of its snapshots (the league's pool) converges
to it. Every step publishes the weights; the league is offered a snapshot
every min(snapshot_every_steps, 50) steps (`league.maybe_add` decides).
With `policy_loss='ppo'` a step is one synchronous round
(`agents.actor_critic.rounds`): exactly `batch_size` trajectories of the current
version from each actor, PPO's epochs, then the next version.

The same learner trains a main exploiter (`learner='exploiter0'`, ...) on
its own queue; when the league freezes it into the pool, it restarts from
the initial weights (or main's newest snapshot, `exploiter_reset='main'`)
with a fresh optimizer state, published as its next version.
"""
import os
import time
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from repertory import core
from repertory import launch
from repertory.agents.selfplay import config as config_lib
from repertory.agents.selfplay import loss as loss_lib
from repertory.agents.selfplay import networks as networks_lib
from repertory.agents.selfplay import updates
from repertory.components import learners
from repertory.components import loggers
from repertory.components import model_store
from repertory.components import networks
from repertory.components import replay as replay_lib
from repertory.agents.actor_critic import rounds
from repertory.components import variables


class SelfPlayLearner(core.Learner):
  """NeuRD, A2C or MMD updates on batches of per-player trajectories."""

  def __init__(self, config: config_lib.Config, spec: Any, replay: Any,
               counter: Any, league: Any, logdir: Optional[str] = None,
               role: str = config_lib.MAIN, num_actors: int = 1):
    self._config, self._counter, self._league = config, counter, league
    self._role = role  # The learner's name in the league.
    self._table = config_lib.table_name(role)
    # Counted as the run's learner steps (main) or '<exploiter>_steps'.
    self._steps_key = ('learner_steps' if role == config_lib.MAIN
                       else f'{role}_steps')
    self._network = networks_lib.network_for(spec, config)
    self._initial = self._weights()  # What an exploiter resets to.
    self._learning_rate = tf.Variable(config.learning_rate, trainable=False)
    self._optimizer = learners.Adam(self._learning_rate)
    learners.create_optimizer_state(self._optimizer,
                                    self._network.trainable_variables)
    self._magnet = None  # 'mmd' with a moving magnet: the magnet network.
    if config.policy_loss == 'mmd' and config.magnet_update_steps:
      self._magnet = networks_lib.make_network(
          spec, config.hidden_sizes, conv_channels=config.conv_channels)
      self._update_magnet()
    saved = {'network': self._network, 'optimizer': self._optimizer}
    if self._magnet is not None:
      saved['magnet'] = self._magnet
    self._store = variables.VariableStore({config_lib.POLICY: self._weights()})
    self._steps = 0
    self._guard = None
    if logdir:
      self._guard = learners.FaultTolerance(
          model_store.ModelStore(
              os.path.join(logdir, 'checkpoints'),
              saved, checkpoint_every_steps=config.checkpoint_every_steps),
          self._store, lambda: {config_lib.POLICY: self._weights()})
      restored = self._guard.resume()
      if restored is not None:
        self._steps = restored.step
    self._replay = replay
    self._iterator = None
    self._rounds = None  # 'ppo': one learner step per synchronous round.
    if config.policy_loss == 'ppo':
      self._rounds = rounds.RoundCollector(
          replay, self._table, num_actors, config.batch_size,
          config.round_timeout_s, time_major=False,
          name=f'Self-play PPO ({role})')
    self._logger = loggers.make_logger(
        'learner', os.path.join(logdir, 'learner') if logdir else None,
        steps_key='learner/steps')  # TensorBoard keyed by learner steps.
    if config.policy_loss in updates.POLICY_LOSSES:  # IMPALA's, PPO's.
      self._sgd = updates.make_update(config, self._network, self._optimizer)
    else:  # NeuRD, A2C, MMD.
      self._sgd = loss_lib.make_update(config, self._network, self._optimizer,
                                       self._magnet)
    self._last_log = time.time()

  def _weights(self):
    return networks.get_variables(self._network)

  def _update_magnet(self) -> None:
    for magnet, live in zip(self._magnet.variables, self._network.variables):
      magnet.assign(live)

  def _set_learning_rate(self) -> None:
    c = self._config
    if c.learning_rate_decay_steps:
      self._learning_rate.assign(c.learning_rate / np.sqrt(
          1.0 + self._steps / c.learning_rate_decay_steps))

  @property
  def version(self) -> int:
    return self._store.version

  def get_variables(self, names) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def variables_channel_address(self) -> str:
    return self._store.variables_channel_address()

  def wait_for_version(self, version: int, timeout_s: float = 2.0) -> int:
    """Waits up to `timeout_s` for `version`; returns the version served."""
    try:
      return self._store.wait_for_version(version, timeout_s)
    except TimeoutError:
      return self._store.version

  def _next_batch(self):
    """The next batch (`[B, L, ...]`), or None once the program stops."""
    if self._rounds is not None:  # Exactly the round of this version.
      stop = launch.stop_event() if launch.get_launch_type() else None
      return self._rounds.collect(
          self.version, lambda: stop is not None and stop.is_set())
    if self._iterator is None:
      dataset = replay_lib.make_dataset(
          self._replay, self._table, self._config.batch_size,
          prefetch_size=1,
          max_in_flight_samples_per_worker=self._config.batch_size)
      self._iterator = replay_lib.StarvationLoggingIterator(
          iter(dataset), self._replay, self._table)
    return next(self._iterator).data

  def step(self) -> None:
    data = self._next_batch()
    if data is None:
      return
    lag = replay_lib.policy_lag(data['policy_version'], self.version)
    self._set_learning_rate()
    metrics = self._sgd(data)
    applied = bool(metrics.pop('applied'))
    if self._guard is not None and self._guard.stopped:
      return
    if applied or self._rounds is not None:  # Every round: its next version.
      self._store.publish({config_lib.POLICY: self._weights()})
    self._steps += 1
    c = self._config
    if self._magnet is not None and self._steps % c.magnet_update_steps == 0:
      self._update_magnet()
    if self._guard is not None:
      self._guard.record_update(applied, self._steps)
    counts = ({self._steps_key: 1} if self._role != config_lib.MAIN else
              dict(learner_steps=1, policy_lag_items=len(lag),
                   policy_lag_sum=int(lag.sum())))
    if self._rounds is not None:  # PPO rounds' stale unrolls, every role's.
      counts['dropped_stale'] = self._rounds.take_dropped()
    self._counter.futures.increment(**counts)
    if self._steps % min(c.snapshot_every_steps or 50, 50) == 0:
      if self._role == config_lib.MAIN:
        self._league.futures.maybe_add(self._weights(), self.version,
                                       self._steps, self._role)
      elif self._league.maybe_add(self._weights(), self.version, self._steps,
                                  self._role) is not None:
        self.reset()  # Its generation is over: it froze into the pool.
    if self._steps % c.learner_log_every == 0:
      record = {f'losses/{k}': float(v) for k, v in metrics.items()}
      record.update({'learner/version': self.version,
                     'learner/steps': self._steps,
                     'charts/policy_lag': float(np.mean(lag)),
                     'charts/learning_rate': float(
                         self._learning_rate.numpy())})
      record.update(self._league.summary())
      self._logger.write(record)

  def reset(self) -> None:
    """Restarts an exploiter: its network from the initial weights (or the
    main agent's newest snapshot), Adam's moments and step from zero; the
    weights are published as the next version and the league is told."""
    newest = (self._league.newest(config_lib.MAIN)
              if self._config.exploiter_reset == 'main' else None)
    like = None if newest is None else newest[0]
    weights = self._initial if like is None else self._league.get_weights(
        like)[1]
    networks.assign_variables(self._network, weights)
    for slot in [self._optimizer.step, *self._optimizer.m,
                 *self._optimizer.v]:
      slot.assign(tf.zeros_like(slot))
    if self._magnet is not None:
      self._update_magnet()
    self._store.publish({config_lib.POLICY: self._weights()})
    self._league.reset_learner(self._role, self._steps, like)

  def run(self) -> None:
    launch.run_until_stop(self.step)
    self._logger.close()
