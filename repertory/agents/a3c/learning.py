"""The A3C parameter server (Mnih et al. 2016, arXiv:1602.01783).

Actors call `apply_gradients(gradients, version)` once per rollout; the
learner applies each gradient at once with one shared optimizer, publishes
the new weights as version + 1 and records the gradient's staleness, the
number of updates applied since the weights it was computed with:
`staleness = learner version - gradient version`. Staleness goes to the
counter as `policy_lag_sum` / `policy_lag_items`, so the run monitor shows
the mean policy lag of A3C like that of the other agents.

A gradient that is not finite (or whose update would not be) is not applied:
the weights and the optimizer's state stay as they were and the version does
not change. With a `checkpoint_dir` the learner resumes from its latest
checkpoint (version and gradient count continue), checkpoints every
`checkpoint_every_*`, writes a final checkpoint when the program stops, and
after `max_bad_updates` non-finite gradients in a row rolls back to its
latest checkpoint (`repertory.components.learners.FaultTolerance`).
"""

import contextlib
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from absl import logging
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory import core
from repertory import launch
from repertory.agents.a3c import config as config_lib
from repertory.agents.a3c import networks as networks_lib
from repertory.components import learners
from repertory.components import model_store
from repertory.components import networks
from repertory.components.loggers import make_logger
from repertory.components import variables

# The learner sends its counts and logs its metrics this often (seconds).
REPORT_EVERY_S = 1.0


def make_optimizer(config: config_lib.Config) -> snt.Optimizer:
  """The shared optimizer named by `config.optimizer`."""
  if config.optimizer == 'rmsprop':
    return snt.optimizers.RMSProp(config.learning_rate,
                                  decay=config.rmsprop_decay,
                                  epsilon=config.epsilon)
  return snt.optimizers.Adam(config.learning_rate, epsilon=config.epsilon)


class A3CLearner(core.Learner):
  """Applies actors' gradients as they arrive; serves versioned weights.

  `step()` reports the counts and metrics gathered since the last one and
  `run()` calls it every `REPORT_EVERY_S` until the program stops; all the
  learning happens in `apply_gradients`, called by the actors.
  """

  def __init__(self,
               config: config_lib.Config,
               observation_spec: Any,
               action_spec: Any,
               counter: Any = None,
               logdir: Optional[str] = None,
               checkpoint_dir: Optional[str] = None,
               snapshot_dir: Optional[str] = None):
    """Builds the network, the shared optimizer and the version store.

    Args:
      config: A3C's `Config`.
      observation_spec: the spec of ONE environment's observation.
      action_spec: the spec of ONE environment's discrete action.
      counter: optional counter (client) for learner counts.
      logdir: where the learner's metrics go.
      checkpoint_dir: if set, resume from the latest checkpoint there,
        checkpoint every `config.checkpoint_every_*`, roll back after
        `config.max_bad_updates` non-finite gradients in a row, and write a
        final checkpoint when the program stops.
      snapshot_dir: if set, a greedy policy snapshot (SavedModel) is
        exported there when the program stops.
    """
    tf.random.set_seed(config.seed)
    self._config = config
    self._network = networks_lib.make_network(
        config.hidden_sizes, observation_spec, action_spec)
    self._variables = networks_lib.variable_list(self._network)
    self._shapes = [tuple(v.shape) for v in self._variables]
    self._optimizer = make_optimizer(config)
    self._store = variables.VariableStore(
        {networks_lib.POLICY: networks.get_variables(self._network)})
    self._counter = counter
    self._logger = make_logger('learner', logdir, time_delta=10.0)
    self._lock = threading.Lock()
    self._pending = self._zero_counts()
    self._metrics = self._zero_metrics()
    self._last_report = time.monotonic()
    self._applied = 0
    self._steps = 0  # Gradients received (applied or not); resumed.
    self._nonfinite = 0
    self._unknown_versions = 0  # Gradients of versions ahead of ours.
    self._staleness_sum = 0
    self._count_future = None
    self._per_actor: Dict[int, int] = {}

    @tf.function
    def apply(gradients: List[tf.Tensor]):
      # A non-finite gradient leaves weights and the optimizer's state alone.
      applied = learners.apply_if_finite(self._optimizer, gradients,
                                         self._variables)
      return applied, tf.linalg.global_norm(gradients)

    self._apply = apply
    self._observation_spec = observation_spec
    self._snapshot_dir = snapshot_dir
    self._guard = None
    if checkpoint_dir is not None:
      # Slots in variable_list order, the order gradients are applied in.
      learners.create_optimizer_state(self._optimizer, self._variables)
      self._guard = learners.FaultTolerance(
          model_store.ModelStore(
              checkpoint_dir,
              {'network': self._network, 'optimizer': self._optimizer},
              max_to_keep=config.checkpoints_to_keep,
              checkpoint_every_steps=config.checkpoint_every_steps,
              checkpoint_every_minutes=config.checkpoint_every_minutes),
          self._store, self._policy_variables,
          max_bad_updates=config.max_bad_updates)
      restored = self._guard.resume()
      if restored is not None:
        self._steps = restored.step
    if snapshot_dir is not None and launch.get_launch_type() is not None:
      # After the guard's final checkpoint (stop handlers run in order).
      launch.register_stop_handler(self._final_snapshot)

  def _policy_variables(self) -> Dict[str, Any]:
    return {networks_lib.POLICY: networks.get_variables(self._network)}

  @staticmethod
  def _zero_counts() -> Dict[str, float]:
    return {'learner_steps': 0, 'policy_lag_sum': 0, 'policy_lag_items': 0}

  @staticmethod
  def _zero_metrics() -> Dict[str, float]:
    return {'applied': 0, 'staleness_sum': 0, 'staleness_max': 0,
            'gradient_norm_sum': 0.0}

  # --- VariableSource -------------------------------------------------------

  def get_variables(self, names: Sequence[str]) -> core.VersionedVariables:
    return self._store.get_variables(names)

  def variables_channel_address(self) -> str:
    """`get_variables` over TCP (`VariableClient(transport='tcp')`)."""
    return self._store.variables_channel_address()

  @property
  def version(self) -> int:
    return self._store.version

  @property
  def applied(self) -> int:
    """Gradients applied so far by this learner (not counting a resumed
    run's)."""
    return self._applied

  @property
  def steps(self) -> int:
    """Gradients received, applied or not (continues on resume)."""
    return self._steps

  @property
  def mean_staleness(self) -> float:
    """Mean staleness of every gradient applied so far (nan before one)."""
    return (self._staleness_sum / self._applied if self._applied
            else float('nan'))

  # --- the parameter server -------------------------------------------------

  def applied_per_actor(self) -> Dict[int, int]:
    """Gradients applied so far from each actor that named itself."""
    with self._lock:
      return dict(self._per_actor)

  def apply_gradients(self, gradients: Sequence[np.ndarray], version: int,
                      actor_id: Optional[int] = None) -> int:
    """Applies one actor's gradient now; returns the new version (the
    current one if the gradient was not finite and so not applied).

    Args:
      gradients: one array per variable, in `networks.variable_list` order.
      version: the version of the weights the gradient was computed with.
      actor_id: the sending actor (for `applied_per_actor`), if given.
    """
    shapes = [tuple(np.shape(g)) for g in gradients]
    if shapes != self._shapes:
      raise ValueError(
          f'A3C learner: gradient shapes {shapes} do not match the network\'s '
          f'variables {self._shapes} (in variable_list order).')
    gradients = [tf.convert_to_tensor(g, tf.float32) for g in gradients]
    guard = self._guard
    with guard.lock if guard else contextlib.nullcontext():
      if guard is not None and guard.stopped:
        # The final checkpoint is written: no update after it.
        return self._store.version
      with self._lock:
        staleness = self._store.version - int(version)
        if staleness < 0:
          # Computed on weights this learner no longer holds: it restarted
          # from an older checkpoint (--restart_learner). Dropped; the
          # actor pulls the current weights before its next gradient.
          self._unknown_versions += 1
          logging.warning('A3C learner at version %d dropped a gradient of '
                          'version %s from actor %s (a restarted learner).',
                          self._store.version, version, actor_id)
          return self._store.version
        applied, norm = self._apply(gradients)
        applied, norm = bool(applied), float(norm)
        self._steps += 1
        self._pending['learner_steps'] += 1
        if applied:
          self._store.publish(self._policy_variables())
          self._applied += 1
          self._staleness_sum += staleness
          if actor_id is not None:
            self._per_actor[actor_id] = self._per_actor.get(actor_id, 0) + 1
          self._pending['policy_lag_sum'] += staleness
          self._pending['policy_lag_items'] += 1
          m = self._metrics
          m['applied'] += 1
          m['staleness_sum'] += staleness
          m['staleness_max'] = max(m['staleness_max'], staleness)
          m['gradient_norm_sum'] += norm
        else:
          self._nonfinite += 1
          if guard is None:
            logging.warning('A3C learner: non-finite gradient from actor %s '
                            'not applied.', actor_id)
        steps = self._steps
      if guard is not None:
        guard.record_update(applied, steps)  # Checkpoints; rolls back.
      new_version = self._store.version
    if time.monotonic() - self._last_report >= REPORT_EVERY_S:
      self._send_counts()
    return new_version

  def _send_counts(self) -> None:
    with self._lock:
      pending, self._pending = self._pending, self._zero_counts()
      self._last_report = time.monotonic()
    if self._counter is not None and pending['policy_lag_items']:
      future, self._count_future = (
          self._count_future, self._counter.futures.increment(**pending))
      if future is not None and future.done():
        future.result()  # Surfaces a failed earlier increment.

  def step(self) -> Dict[str, float]:
    """Sends pending counts; logs and returns the metrics since last step."""
    self._send_counts()
    with self._lock:
      m, self._metrics = self._metrics, self._zero_metrics()
    applied = max(m['applied'], 1)
    metrics = {
        'version': self.version,
        'applied': m['applied'],
        'charts/staleness_mean': m['staleness_sum'] / applied,
        'charts/staleness_max': m['staleness_max'],
        'charts/gradient_norm': m['gradient_norm_sum'] / applied,
        'learner/steps': self._steps,
        'learner/nonfinite_updates': self._nonfinite,
        'learner/dropped_unknown_version': self._unknown_versions,
    }
    if m['applied']:
      self._logger.write(metrics)
    return metrics

  # --- checkpoints ----------------------------------------------------------

  def rollback(self, version: Optional[int] = None,
               tag: Optional[str] = None) -> int:
    """Restores checkpoint `version` (or `tag`; default: the latest) and
    republishes its weights as a new, higher version, which it returns."""
    if self._guard is None:
      raise ValueError('rollback() needs a learner built with checkpoint_dir.')
    return self._guard.rollback(version=version, tag=tag)

  def export_snapshot(self, path: str) -> str:
    """Exports the greedy policy as a SavedModel (`repertory.evaluate`)."""
    return networks_lib.export_snapshot(path, self._network,
                                        self._observation_spec)

  def _final_snapshot(self) -> None:
    with self._guard.lock if self._guard else contextlib.nullcontext():
      try:
        logging.info('Policy snapshot exported to %s.',
                     self.export_snapshot(self._snapshot_dir))
      except Exception:  # pylint: disable=broad-except
        logging.exception('Exporting the policy snapshot failed.')

  def run(self) -> None:
    stop = launch.stop_event()
    while not stop.wait(REPORT_EVERY_S):
      self.step()
    try:
      self._send_counts()
    except Exception:  # pylint: disable=broad-except
      logging.info('A3C learner could not send its last counts (stopping).')
