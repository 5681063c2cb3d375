"""A3C actors: roll out, compute the n-step actor-critic gradient, push it.

Each rollout (Mnih et al. 2016, algorithm S3, with a batch of environments
per actor): pull the learner's weights (version v), step the actor's
environments `unroll_length` times, compute the gradient of the n-step
actor-critic loss on that rollout with the same weights, and send it to the
learner as one call carrying a list of numpy arrays and v.

Rollout layout (as `UnrollAdder`'s, kept in memory): index t holds o_t with
the reward and discount that came with it, and the action taken on it.
Transition t -> t+1 is not real when o_{t+1} is the FIRST step of an
automatic reset; there the return is set to V(o_t) with discount 0, so its
advantage is exactly 0 and nothing leaks across the reset.
"""

from typing import Any, Dict, List, Tuple

import dm_env
import numpy as np
import tensorflow as tf

from repertory.agents.a3c import config as config_lib
from repertory.agents.a3c import networks as a3c_networks
from repertory.agents.actor_critic import mlp_policy as networks_lib
from repertory.agents.actor_critic import rollout_actor
from repertory.components import actors
from repertory.components import losses
from repertory.components import networks

_FIRST = int(dm_env.StepType.FIRST)


class _Rollout:
  """An adder that keeps one rollout in memory (`UnrollAdder`'s layout):
  `take()` returns `[T+1, N]` observations, rewards, discounts and step
  types and `[T, N]` actions, and starts the next rollout at the last step."""

  def __init__(self):
    self._steps, self._actions = [], []

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    self._steps, self._actions = [timestep], []

  def add(self, action: Any, timestep: dm_env.TimeStep, extras=None) -> None:
    del extras
    self._actions.append(action)
    self._steps.append(timestep)

  def set_policy_version(self, version: int) -> None:
    del version  # The learner is told the version with the gradient.

  def take(self) -> Dict[str, np.ndarray]:
    steps, actions = self._steps, self._actions
    self.add_first(steps[-1])
    stack = lambda field, dtype: np.stack(  # pylint: disable=g-long-lambda
        [getattr(t, field) for t in steps]).astype(dtype)
    return {
        'observation': np.stack([t.observation for t in steps]),
        'action': np.stack(actions).astype(np.int32),
        'reward': stack('reward', np.float32),
        'discount': stack('discount', np.float32),
        'step_type': stack('step_type', np.int32),
    }


class A3CActor(rollout_actor.RolloutActor):
  """Acts, computes gradients locally and pushes them to the learner.

  Args: as `RolloutActor`'s (the learner has `get_variables` and `update`).
  """

  FETCH_TIMEOUT_FIELD = 'push_timeout_s'

  def _setup(self) -> None:
    actors.limit_tf_threads()  # Before TensorFlow runs the gradients.
    self._adder = _Rollout()
    # The eager network computes gradients (once per rollout); the policy
    # acts every step in numpy (`RolloutActor`'s `numpy_policy`).
    with networks.seeded(self._seed):  # The learner's weights anyway.
      self._network = networks_lib.make_network(
          self._config.hidden_sizes, self.observation_spec, self.action_spec)
    self._variables = a3c_networks.variable_list(self._network)
    self._gradients = tf.function(self._gradients_impl, autograph=False)
    self.rollouts = 0
    self.last_version = -1

  def _gradients_impl(self, observation, action, reward, discount, step_type):
    """Gradients of the n-step actor-critic loss on one rollout `[T+1, N]`."""
    c = self._config
    with tf.GradientTape() as tape:
      output = self._network(observation)                 # [T + 1, N, ...]
      v_tm1 = output.value[:-1]                           # [T, N]
      bootstrap_value = tf.stop_gradient(output.value[-1])  # [N]
      mask = tf.not_equal(step_type[1:], _FIRST)          # [T, N]
      r_t = tf.where(mask, reward[1:], tf.stop_gradient(v_tm1))
      discount_t = tf.where(mask, c.discount * discount[1:], 0.0)
      logits = output.logits[:-1]
      maskf = tf.cast(mask, tf.float32)
      loss = losses.actor_critic_loss_from_log_probs(
          losses.categorical_log_prob(logits, action) * maskf,
          losses.categorical_entropy(logits) * maskf, v_tm1,
          bootstrap_value, r_t, discount_t, baseline_cost=c.baseline_cost,
          entropy_cost=c.entropy_cost)
    gradients = tape.gradient(loss.loss, self._variables)
    if c.max_grad_norm is not None:
      gradients, norm = tf.clip_by_global_norm(gradients, c.max_grad_norm)
    else:
      norm = tf.linalg.global_norm(gradients)
    metrics = dict(loss.extra)
    metrics['gradient_norm'] = norm
    return gradients, metrics

  def pull(self) -> int:
    """Fetches the learner's newest weights; returns their version."""
    self._weights.update(wait=True)
    networks.assign_variables(self._network, self._weights.params)
    self._policy.set_weights(self._weights.params)
    return self._weights.version

  def rollout(self) -> Dict[str, np.ndarray]:
    """Steps every environment `unroll_length` times; returns `[T+1, N]`
    (observations, rewards, discounts, step types) and `[T, N]` actions."""
    self.collect(self._config.unroll_length)
    return self._adder.take()

  def compute_gradients(self, data: Dict[str, np.ndarray]
                        ) -> Tuple[List[np.ndarray], Dict[str, float]]:
    """The rollout's gradient as numpy arrays (in `variable_list` order)."""
    gradients, metrics = self._gradients(
        data['observation'], data['action'], data['reward'],
        data['discount'], data['step_type'])
    return ([g.numpy() for g in gradients],
            {k: float(v) for k, v in metrics.items()})

  def round(self, stop) -> bool:
    del stop
    self.step()
    return True

  def step(self) -> int:
    """One rollout: pull, act, compute and push a gradient. Returns the
    learner's version after it applied the gradient."""
    version = self.pull()
    data = self.rollout()
    gradients, _ = self.compute_gradients(data)
    metrics = self._learner.update(gradients, version, self._actor_id)
    new_version = version if metrics is None else metrics['learner/version']
    self.rollouts += 1
    self.last_version = int(new_version)
    self.report(self._config.unroll_length)
    return self.last_version
