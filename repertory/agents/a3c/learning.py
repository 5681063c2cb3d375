"""The A3C parameter server (Mnih et al. 2016, arXiv:1602.01783), as an
algorithm for a push-based `learners.LearnerHost`.

Actors call the host's `update(gradients, version, actor_id)` once per
rollout; the algorithm applies each gradient at once with one shared
optimizer and the host publishes the new weights as version + 1. It records
the gradient's staleness, the number of updates applied since the weights it
was computed with (`learner version - gradient version`), as `policy_lag_sum`
/ `policy_lag_items`, so the run monitor shows A3C's lag like the others'.
A gradient that is not finite leaves the weights and the optimizer alone; one
of a version ahead of the learner's (a learner restarted from an older
checkpoint) is dropped and counted.
"""

from typing import Any, Dict, Optional, Sequence

from absl import logging
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.agents.a3c import config as config_lib
from repertory.agents.a3c import networks as a3c_networks
from repertory.components import learners
from repertory.components import networks
from repertory.agents.actor_critic import mlp_policy


def make_optimizer(config: config_lib.Config) -> snt.Optimizer:
  """The shared optimizer named by `config.optimizer`."""
  if config.optimizer == 'rmsprop':
    return snt.optimizers.RMSProp(config.learning_rate,
                                  decay=config.rmsprop_decay,
                                  epsilon=config.epsilon)
  return learners.Adam(config.learning_rate, epsilon=config.epsilon)


class A3C(learners.Algorithm):
  """Applies one actor's gradient per step (pushed, not pulled)."""

  def __init__(self, config: config_lib.Config, spec: Any, seed: int = 0):
    self._spec = spec
    with networks.seeded(seed):
      self.network = mlp_policy.make_network(config.hidden_sizes,
                                             spec.observations, spec.actions)
    self._variables = a3c_networks.variable_list(self.network)
    self._shapes = [tuple(v.shape) for v in self._variables]
    self.optimizer = make_optimizer(config)
    # Slots in variable_list order, the order gradients are applied in.
    learners.create_optimizer_state(self.optimizer, self._variables)
    # Read at every publish: named once, read in one call.
    self._read_policy = networks.VariableReader(self.network)
    self.applied_per_actor: Dict[int, int] = {}
    self._staleness_sum = 0
    self._dropped = 0

    @tf.function
    def apply(gradients):
      applied = learners.apply_if_finite(self.optimizer, gradients,
                                         self._variables)
      return applied, tf.linalg.global_norm(gradients)

    self._apply = apply

  def policy_variables(self) -> Dict[str, Any]:
    return {mlp_policy.POLICY: self._read_policy()}

  def save(self) -> Dict[str, Any]:
    return {'network': self.network, 'optimizer': self.optimizer}

  def export_snapshot(self, path: str) -> str:
    return mlp_policy.export_snapshot(path, self.network,
                                      self._spec.observations)

  @property
  def mean_staleness(self) -> float:
    """Mean staleness of every gradient applied so far (nan before one)."""
    applied = sum(self.applied_per_actor.values())
    return self._staleness_sum / applied if applied else float('nan')

  def step(self, version: int, gradients: Sequence[np.ndarray] = (),
           gradient_version: int = 0,
           actor_id: int = -1) -> Optional[learners.Update]:
    """Applies `gradients` (one array per variable, `variable_list` order),
    computed by actor `actor_id` on weights of `gradient_version`."""
    shapes = [tuple(np.shape(g)) for g in gradients]
    if shapes != self._shapes:
      raise ValueError(
          f'A3C learner: gradient shapes {shapes} do not match the network\'s '
          f'variables {self._shapes} (in variable_list order).')
    staleness = version - int(gradient_version)
    if staleness < 0:  # Weights this learner no longer holds (restarted).
      self._dropped += 1
      logging.warning('A3C learner at version %d dropped a gradient of '
                      'version %s from actor %s (a restarted learner).',
                      version, gradient_version, actor_id)
      return learners.Update(
          {'learner/dropped_unknown_version': self._dropped}, applied=None)
    applied, norm = self._apply(
        [tf.convert_to_tensor(g, tf.float32) for g in gradients])
    applied = bool(applied)
    if applied:
      self._staleness_sum += staleness
      self.applied_per_actor[actor_id] = (
          self.applied_per_actor.get(actor_id, 0) + 1)
    return learners.Update(
        {'charts/staleness': staleness, 'charts/gradient_norm': float(norm),
         'learner/dropped_unknown_version': self._dropped},
        counts={'learner_steps': 1, 'policy_lag_sum': staleness * applied,
                'policy_lag_items': int(applied)},
        applied=applied)


def make_learner(config: config_lib.Config, spec: Any, counter: Any = None,
                 logdir: Optional[str] = None, seed: int = 0,
                 checkpoint: Any = None) -> learners.LearnerHost:
  """The learner node: `A3C` in a push-based `LearnerHost` (actors call its
  `update`). With `logdir`: metrics, checkpoints and the snapshot there."""
  return learners.LearnerHost.in_logdir(
      A3C(config, spec, seed=seed), logdir, counter=counter,
      checkpoint=checkpoint, pull=False)
