"""MMD's moving magnet (`magnet_update_steps`) and the learning rate's decay
(`learning_rate_decay_steps`) on real Kuhn poker unrolls in a real Reverb
queue: the magnet network starts as the live network, stays behind it
between refreshes, becomes a copy of it every N learner steps, and is saved
with the learner's checkpoint (a resumed learner continues with the saved
magnet and the saved step count, which also sets its learning rate)."""

import functools

import numpy as np
import pytest
import reverb

from repertory import experiment as experiment_lib
from repertory.agents import neurd
from repertory.agents.actor_critic import tables
from repertory.agents.neurd import acting
from repertory.agents.neurd import learning
from repertory.components import checkpointing
from repertory.components import learners
from repertory.components import league

GAME = 'openspiel:kuhn_poker'
ENVS = 4
CONFIG = dict(policy_loss='mmd', magnet_update_steps=3, magnet_strength=0.5,
              unroll_length=4, batch_size=ENVS, max_queue_size=64,
              hidden_sizes=(16,), weights_transport='handle',
              learning_rate=1e-2, learning_rate_decay_steps=2)


def _learning_rate(step):
  """What learner step `step` (from 1) uses: lr / sqrt(1 + (step - 1) / N)."""
  return CONFIG['learning_rate'] / (
      1.0 + (step - 1) / CONFIG['learning_rate_decay_steps']) ** 0.5


def _spec():
  """The seat's spec (flat views), as in a league."""
  return experiment_lib.environment_spec(
      league.against_random_seat(GAME, 0))


def _weights(network):
  return [v.numpy().copy() for v in network.variables]


def _same(a, b):
  return all(np.array_equal(x, y) for x, y in zip(a, b))


class _Setup:
  """A Reverb queue, a `LearnerHost` around `NeuRD` checkpointing every step
  into `directory`, and an actor playing the alternating seat of Kuhn
  poker against a random player, writing unrolls into the queue."""

  def __init__(self, server, directory, config):
    env = functools.partial(league.against_random_seat, GAME)
    spec = _spec()
    client = reverb.Client(f'localhost:{server.port}')
    self.algorithm = learning.NeuRD(config, spec, client, tables.TABLE,
                                    seed=1)
    self.host = learners.LearnerHost(
        self.algorithm, checkpoint_dir=directory,
        checkpoint=checkpointing.CheckpointSettings(every_steps=1,
                                                    every_minutes=None))
    self.actor = acting.NeuRDActor(0, config, env, ENVS, 0, self.host, client,
                                   tables.TABLE)

  def learner_step(self):
    """Acts until an item is in the queue, then one learner step."""
    self.actor.run(num_steps=CONFIG['unroll_length'] + 1)
    assert self.host.step() is not None

  def close(self):
    self.actor.close()


def _server():
  """A Reverb server with the agent's unroll queue."""
  return reverb.Server(tables.make_tables(
      neurd.Config(**CONFIG), _spec(), envs_per_actor=ENVS))


def test_the_magnet_follows_the_live_network_every_n_steps(tmp_path):
  config = neurd.Config(**CONFIG)
  server = _server()
  setup = _Setup(server, str(tmp_path / 'checkpoints'), config)
  algorithm = setup.algorithm
  initial = _weights(algorithm.network)
  assert _same(_weights(algorithm.magnet), initial)
  try:
    live = []
    for step in range(1, 5):
      setup.learner_step()
      assert np.isclose(algorithm.learning_rate.numpy(), _learning_rate(step))
      live.append(_weights(algorithm.network))
      magnet = _weights(algorithm.magnet)
      if step < 3:  # Between refreshes: the initial network, behind the live.
        assert _same(magnet, initial) and not _same(magnet, live[-1])
      elif step == 3:  # Refreshed: a copy of the live network.
        assert _same(magnet, live[-1])
      else:  # Behind again: the copy taken at step 3.
        assert _same(magnet, live[2]) and not _same(magnet, live[-1])
  finally:
    setup.close()
    server.stop()  # Its learner's dataset would take the next unrolls.

  # A new learner on the same checkpoints resumes the magnet and the step
  # count: its next refresh comes at step 6, not 3 steps after the restart.
  server = _server()
  resumed = _Setup(server, str(tmp_path / 'checkpoints'), config)
  try:
    assert resumed.host.status()['learner/steps'] == 4
    assert _same(_weights(resumed.algorithm.network), live[-1])
    assert _same(_weights(resumed.algorithm.magnet), live[2])
    resumed.learner_step()  # Step 5.
    assert _same(_weights(resumed.algorithm.magnet), live[2])
    assert np.isclose(resumed.algorithm.learning_rate.numpy(),
                      _learning_rate(5))
    resumed.learner_step()  # Step 6: refreshed.
    assert _same(_weights(resumed.algorithm.magnet),
                 _weights(resumed.algorithm.network))
  finally:
    resumed.close()
    server.stop()


def test_without_moving_magnet_there_is_no_magnet_network():
  spec = _spec()
  for kwargs in (dict(policy_loss='mmd', magnet_update_steps=None),
                 dict(policy_loss='neurd', magnet_update_steps=3)):
    algorithm = learning.NeuRD(neurd.Config(**kwargs), spec, None, 'queue')
    assert algorithm.magnet is None and 'magnet' not in algorithm.save()


def test_refuses_a_magnet_period_below_one():
  with pytest.raises(ValueError, match=r'magnet_update_steps must be >= 1'):
    neurd.Config(policy_loss='mmd', magnet_update_steps=0)
