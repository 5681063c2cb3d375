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

from absl import logging
import dm_env
import numpy as np
import tensorflow as tf

from repertory import core
from repertory import environments
from repertory import launch
from repertory.agents.a3c import config as config_lib
from repertory.agents.a3c import networks as a3c_networks
from repertory.components.actor_critic import mlp_policy as networks_lib
from repertory.components.actors import limit_tf_threads
from repertory.components import losses
from repertory.components import networks
from repertory.components import variables
from repertory.components.evaluation import episodes

_FIRST = int(dm_env.StepType.FIRST)


class A3CActor(core.Worker):
  """Acts, computes gradients locally and pushes them to the learner."""

  def __init__(self,
               actor_id: int,
               config: config_lib.Config,
               env: str,
               envs_per_actor: int,
               seed: int,
               learner: Any,
               counter: Any = None,
               monitor: Any = None):
    """Builds the environments, the local network and its loss.

    Args:
      actor_id: this actor's index.
      config: A3C's `Config`.
      env: environment spec for `repertory.environments`.
      envs_per_actor: environments stepped per policy call.
      seed: seed of the first environment (the others follow) and of the
        action sampling.
      learner: the learner (client): `get_variables`, `update`.
      counter: optional counter (client): `increment(actor_steps=...)`.
      monitor: optional run monitor (client): `record_episodes(...)`.
    """
    limit_tf_threads()
    self._actor_id = actor_id
    self._config = config
    self._num_envs = envs_per_actor
    self._environment = environments.make_batched(env, envs_per_actor,
                                                  seed=seed)
    self._episodes = episodes.EpisodeTracker(envs_per_actor)
    observation_spec = self._environment.observation_spec()
    action_spec = self._environment.action_spec()
    # The eager network computes gradients (once per rollout); the policy
    # acts every step in a graph of its own (no EagerTensor per step).
    with networks.seeded(seed):  # Its weights are the learner's anyway.
      self._network = networks_lib.make_network(
          config.hidden_sizes, observation_spec, action_spec)
    self._variables = a3c_networks.variable_list(self._network)
    self._policy = networks_lib.Policy(config.hidden_sizes, observation_spec,
                                       action_spec, seed=seed)
    self._learner = learner
    self._client = variables.VariableClient(
        learner, networks_lib.POLICY, fetch_timeout_s=config.push_timeout_s)
    self._reporter = episodes.ActorReporter(counter, monitor)
    self._timestep = None
    self._gradients = tf.function(self._gradients_impl)
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
    self._client.update(wait=True)
    networks.assign_variables(self._network, self._client.params)
    self._policy.set_weights(self._client.params)
    return self._client.version

  def rollout(self) -> Dict[str, np.ndarray]:
    """Steps every environment `unroll_length` times; returns `[T+1, N]`
    (observations, rewards, discounts, step types) and `[T, N]` actions."""
    if self._timestep is None:
      self._timestep = self._environment.reset()
    timestep = self._timestep
    observations = [timestep.observation]
    rewards, discounts = [timestep.reward], [timestep.discount]
    step_types = [timestep.step_type]
    actions = []
    for _ in range(self._config.unroll_length):
      action, _, _ = self._policy.step(timestep.observation)
      timestep = self._environment.step(action)
      self._episodes.observe(timestep.step_type, timestep.reward)
      actions.append(action)
      observations.append(timestep.observation)
      rewards.append(timestep.reward)
      discounts.append(timestep.discount)
      step_types.append(timestep.step_type)
    self._timestep = timestep
    return {
        'observation': np.stack(observations),
        'action': np.stack(actions).astype(np.int32),
        'reward': np.stack(rewards).astype(np.float32),
        'discount': np.stack(discounts).astype(np.float32),
        'step_type': np.stack(step_types).astype(np.int32),
    }

  def compute_gradients(self, data: Dict[str, np.ndarray]
                        ) -> Tuple[List[np.ndarray], Dict[str, float]]:
    """The rollout's gradient as numpy arrays (in `variable_list` order)."""
    gradients, metrics = self._gradients(
        data['observation'], data['action'], data['reward'],
        data['discount'], data['step_type'])
    return ([g.numpy() for g in gradients],
            {k: float(v) for k, v in metrics.items()})

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
    self._reporter.report(self._config.unroll_length * self._num_envs,
                          *self._episodes.pop())
    return self.last_version

  def run(self) -> None:
    stop = launch.stop_event()
    try:
      while not stop.is_set():
        self.step()
    except Exception:  # pylint: disable=broad-except
      if stop.is_set():  # The learner went away while stopping.
        logging.info('A3C actor %d stopped.', self._actor_id)
        return
      raise
    finally:
      self._environment.close()
