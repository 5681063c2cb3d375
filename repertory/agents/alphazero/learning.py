"""AlphaZero's learner: batches of positions sampled uniformly from the
replay, `losses.alphazero_loss` plus weight decay, Adam.

The network is a policy-value network (`networks.PolicyValueNetwork`: a
`BoardTorso`, or an MLP, with a policy and a value head) that the actors'
search and `repertory.play` play in numpy (`league.MLPPolicy`).
"""

from typing import Any, Optional

import tensorflow as tf

from repertory.agents.alphazero import config as config_lib
from repertory.components import learners
from repertory.components import losses
from repertory.components import networks
from repertory.components import replay as replay_lib


def make_network(spec: Any, config: config_lib.Config
                 ) -> networks.PolicyValueNetwork:
  """The policy-value network over one player's observation, built."""
  shape = tuple(spec.observations['observation'].shape)
  if config.conv_channels:  # [C, H, W] planes (checked by the program).
    torso = networks.BoardTorso(config.conv_channels, config.hidden_sizes)
  else:
    torso = networks.MLPTorso(config.hidden_sizes, max(len(shape), 1))
  network = networks.PolicyValueNetwork(torso,
                                        int(spec.actions.num_values))
  network(tf.zeros((1,) + shape))
  return network


class AlphaZero(learners.Algorithm):
  """One Adam step per batch of positions."""

  def __init__(self, config: config_lib.Config, spec: Any, replay: Any,
               seed: int = 0):
    self._config = config
    with networks.seeded(seed):
      self._network = make_network(spec, config)
    self._optimizer = learners.Adam(config.learning_rate)
    learners.create_optimizer_state(self._optimizer,
                                    self._network.trainable_variables)
    # Read at every publish: named once, read in one call.
    self._read_policy = networks.VariableReader(self._network)
    dataset = replay_lib.make_dataset(replay, config_lib.TABLE,
                                      config.batch_size, prefetch_size=1)
    self._iterator = replay_lib.StarvationLoggingIterator(
        iter(dataset), replay, config_lib.TABLE)
    self._update = tf.function(self._sgd_step, autograph=False)

  def policy_variables(self):
    return {config_lib.POLICY: self._read_policy()}

  def save(self):
    return {'network': self._network, 'optimizer': self._optimizer}

  def fetch(self, version: int):
    return (next(self._iterator),)

  def _sgd_step(self, data):
    c, network = self._config, self._network
    weights = [v for v in network.trainable_variables if v.shape.rank > 1]
    with tf.GradientTape() as tape:
      outputs = network(data['observation'])
      loss = losses.alphazero_loss(
          outputs.logits, outputs.value, data['search_policy'],
          data['outcome'], data['legal_actions'], c.value_cost)
      l2 = tf.add_n([tf.reduce_sum(tf.square(w)) for w in weights])
      total = loss.loss + c.weight_decay * l2
    gradients = tape.gradient(total, network.trainable_variables)
    gradients, norm = tf.clip_by_global_norm(gradients, c.max_gradient_norm)
    self._optimizer.apply(gradients, network.trainable_variables)
    return dict(loss.extra, total=total, l2=l2, gradient_norm=norm,
                value_mean=tf.reduce_mean(outputs.value))

  def step(self, version: int, sample) -> learners.Update:
    lag = replay_lib.policy_lag(sample.data['policy_version'], version)
    metrics = self._update(sample.data)
    return learners.Update(
        {**{f'losses/{k}': float(v) for k, v in metrics.items()},
         'charts/policy_lag': float(lag.mean())},
        counts={'learner_steps': 1, 'policy_lag_items': len(lag),
                'policy_lag_sum': int(lag.sum())})


def make_learner(config: config_lib.Config, spec: Any, replay: Any,
                 counter: Any = None, logdir: Optional[str] = None,
                 seed: int = 0, checkpoint: Any = None
                 ) -> learners.LearnerHost:
  """`AlphaZero` in a `LearnerHost`: metrics under `<logdir>/learner`,
  checkpoints under `<logdir>/checkpoints` (`repertory.play`'s
  `run:<logdir>`)."""
  return learners.LearnerHost.in_logdir(
      AlphaZero(config, spec, replay, seed), logdir, snapshot=False,
      counter=counter, checkpoint=checkpoint, log_every=50)
