"""Ape-X DQN learner: prioritized n-step double/dueling Q-learning with
importance weights, asynchronous priority updates and a target network
(Horgan et al. 2018, algorithm 2)."""

import functools

import tensorflow as tf

from repertory.agents.apex import networks
from repertory.components import losses
from repertory.agents.prioritized_replay import learning as prioritized


class ApexLearner(prioritized.PrioritizedReplay):
  """Samples prioritized n-step transitions and minimises the importance-
  weighted double Q loss; serves its weights as the 'policy' group."""

  # No data-dependent Python control flow: autograph would only add
  # (a lot of) tracing time.
  @tf.function(autograph=False)
  def _sgd_step(self, sample):
    data, info = sample.data, sample.info
    weights = losses.importance_sampling_weights(
        info.probability, info.table_size,
        self._config.importance_sampling_exponent)  # [B]
    target_q_t = self._target(data['next_observation'])  # [B, A]
    with tf.GradientTape() as tape:
      q_tm1 = self._online(data['observation'])  # [B, A]
      selector_q_t = self._online(data['next_observation'])  # [B, A]
      td = losses.double_q_learning(
          q_tm1, data['action'], data['reward'], data['discount'],
          target_q_t, tf.stop_gradient(selector_q_t))
      loss = tf.reduce_mean(weights * td.loss)
    return self._apply(tape, loss, q_tm1, tf.abs(td.td_error) + 1e-6, sample)


make_learner = functools.partial(prioritized.make_learner, ApexLearner,
                                 networks.make_network)
