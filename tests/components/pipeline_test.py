"""The whole data path in one test_mt program.

An actor node with a random policy steps `catch` through an EnvironmentLoop
(counter, logger) and writes through the n-step, sequence and episode adders,
and steps a batch of environments through the unroll adder, all into a real
Reverb node. The test (as the learner) reads batches back through
`make_dataset`, checks shapes, versions and importance weights, updates
priorities and publishes new weights that the actor's VariableClient picks up.
"""

import time

import numpy as np
import pytest

from repertory import core
from repertory import environments
from repertory import launch
from repertory.components import adders
from repertory.components import counting
from repertory.components import loggers
from repertory.components import replay
from repertory.components import variables
from repertory.components.environment_loop import EnvironmentLoop
from repertory.components.losses import importance_weights

N_STEP, SEQ_LEN, PERIOD, UNROLL, NUM_ENVS = 3, 6, 3, 5, 4
NUM_ACTIONS = 3
STATE = np.zeros(2, np.float32)
EXTRAS = {'logits': np.zeros(NUM_ACTIONS, np.float32)}


def make_tables():
  spec = adders.make_environment_spec(environments.make('catch'))
  return [
      replay.prioritized_replay_table(
          'n_step', 1000, priority_exponent=1.0,
          signature=adders.NStepTransitionAdder.signature(spec, EXTRAS)),
      replay.uniform_replay_table(
          'sequence', 1000, signature=adders.SequenceAdder.signature(
              spec, SEQ_LEN, EXTRAS, core_state_spec=STATE)),
      replay.uniform_replay_table(
          'episode', 1000, signature=adders.EpisodeAdder.signature(
              spec, EXTRAS)),
      replay.queue_table(
          'unroll', 32, batch_size=4, signature=adders.UnrollAdder.signature(
              spec, UNROLL, EXTRAS, core_state_spec=STATE)),
  ]


class RandomActor(core.Actor):
  """A random policy that writes through three adders."""

  def __init__(self, client, variable_client):
    self._rng = np.random.default_rng(0)
    self._variables = variable_client
    self._adders = [
        adders.NStepTransitionAdder(client, N_STEP, 0.99, 'n_step',
                                    actor_id=1),
        adders.SequenceAdder(client, 'sequence', SEQ_LEN, PERIOD, actor_id=1),
        adders.EpisodeAdder(client, 'episode', 50, actor_id=1),
    ]

  def select_action(self, observation):
    return np.int32(self._rng.integers(NUM_ACTIONS))

  def observe_first(self, timestep):
    for adder in self._adders:
      adder.add_first(timestep)

  def observe(self, action, next_timestep):
    for adder in self._adders:
      adder.set_policy_version(self._variables.version)
      if isinstance(adder, adders.SequenceAdder):
        adder.add(action, next_timestep, EXTRAS, core_state=STATE)
      else:
        adder.add(action, next_timestep, EXTRAS)

  def update(self, wait=False):
    self._variables.update(wait)


class ActorWorker:
  """The actor node: an environment loop and a batched unroll loop."""

  def __init__(self, reverb_client, variable_source, counter, logdir):
    self._client = reverb_client
    self._variables = variables.VariableClient(variable_source, 'policy',
                                               update_period=1)
    self._counter = counting.Counter(counter, 'actor', time_delta=0.0)
    self._logger = loggers.make_logger('actor', logdir=logdir, time_delta=60)
    self._rng = np.random.default_rng(1)

  def run(self):
    stop = launch.stop_event()
    self._variables.update(wait=True)
    loop = EnvironmentLoop(environments.make('catch'),
                           RandomActor(self._client, self._variables),
                           counter=self._counter, logger=self._logger)
    batch = environments.make_batched('catch', num_envs=NUM_ENVS, seed=0)
    unroll_adder = adders.UnrollAdder(self._client, 'unroll', UNROLL,
                                      NUM_ENVS, actor_id=1)
    timestep = batch.reset()
    unroll_adder.add_first(timestep)
    logits = np.zeros((NUM_ENVS, NUM_ACTIONS), np.float32)
    states = np.zeros((NUM_ENVS, 2), np.float32)
    while not stop.is_set():
      loop.run(num_episodes=1)
      for _ in range(UNROLL):
        self._variables.update()
        unroll_adder.set_policy_version(self._variables.version)
        actions = self._rng.integers(NUM_ACTIONS, size=NUM_ENVS).astype(
            np.int32)
        timestep = batch.step(actions)
        unroll_adder.add(actions, timestep, {'logits': logits},
                         core_state=states)
      stop.wait(0.005)


def wait_for(predicate, what, timeout_s=120.0):
  deadline = time.monotonic() + timeout_s
  while not predicate():
    if time.monotonic() > deadline:
      raise TimeoutError(f'waited {timeout_s}s for {what}')
    time.sleep(0.05)


@pytest.fixture
def pipeline(tmp_path):
  program = launch.Program('pipeline')
  reverb_handle = program.add_node(launch.ReverbNode(make_tables))
  store_handle = program.add_node(launch.CourierNode(
      variables.VariableStore, {'policy': {'w': np.zeros(3, np.float32)}}))
  counter_handle = program.add_node(launch.CourierNode(counting.Counter))
  program.add_node(launch.CourierNode(ActorWorker, reverb_handle,
                                      store_handle, counter_handle,
                                      str(tmp_path)))
  launched = launch.launch(program, launch_type='test_mt')
  try:
    yield (reverb_handle.dereference(), store_handle.dereference(),
           counter_handle.dereference())
  finally:
    launched.stop(timeout=60)


def test_pipeline(pipeline, tmp_path):
  client, store, counter = pipeline
  sizes = lambda: {k: v.current_size for k, v in client.server_info().items()}
  wait_for(lambda: all(n >= 8 for n in sizes().values()),
           'every table to hold 8 items')

  # n-step transitions from a prioritized table, with importance weights.
  n_step = next(iter(replay.make_dataset(client, 'n_step', batch_size=8)))
  assert n_step.data['observation'].shape == (8, 10, 5)
  assert n_step.data['next_observation'].shape == (8, 10, 5)
  assert n_step.data['extras']['logits'].shape == (8, NUM_ACTIONS)
  np.testing.assert_array_equal(n_step.data['policy_version'], 0)
  np.testing.assert_array_equal(n_step.data['actor_id'], 1)
  weights = importance_weights.importance_sampling_weights(
      n_step.info.probability, n_step.info.table_size, beta=0.6)
  assert weights.shape == (8,)
  assert np.all((weights.numpy() > 0) & (weights.numpy() <= 1.0))

  # Sequences with a stored recurrent state; whole episodes.
  seq = next(iter(replay.make_dataset(client, 'sequence', batch_size=4)))
  assert seq.data['observation'].shape == (4, SEQ_LEN, 10, 5)
  assert seq.data['core_state'].shape == (4, 2)
  episode = next(iter(replay.make_dataset(client, 'episode', batch_size=None)))
  assert episode.data['observation'].shape[1:] == (10, 5)
  assert episode.data['step_type'][-1] == 2  # ends with its LAST step.

  # Priority updates change what is sampled.
  favourite = int(n_step.info.key[0])
  updater = replay.PriorityUpdater(client, 'n_step')
  keys = [int(k) for k in n_step.info.key.numpy()]
  updater.update(keys, [1e9 if k == favourite else 1e-9 for k in keys])
  updater.flush()
  updater.close()
  sampled = [s.info.key for s in client.sample('n_step', 50,
                                               emit_timesteps=False)]
  assert sum(k == favourite for k in sampled) >= 45

  # The learner publishes version 1; the actor's VariableClient picks it up
  # and the unroll queue soon carries version-1 items; older ones are stale.
  assert store.publish({'policy': {'w': np.ones(3, np.float32)}}) == 1
  iterator = replay.StarvationLoggingIterator(
      iter(replay.make_dataset(client, 'unroll', batch_size=4)), client,
      'unroll', timeout_s=60)
  dropped = 0
  for _ in range(100):
    batch = next(iterator)
    assert batch.data['observation'].shape == (4, UNROLL + 1, 10, 5)
    assert batch.data['extras']['logits'].shape == (4, UNROLL + 1,
                                                    NUM_ACTIONS)
    assert batch.data['core_state'].shape == (4, 2)
    fresh = replay.drop_stale(batch, learner_version=1, max_policy_lag=0)
    dropped += fresh.num_dropped
    if fresh.num_dropped < 4:
      break
  else:
    pytest.fail('no unroll of policy version 1 arrived')
  assert dropped > 0  # the queue held version-0 unrolls first.
  iterator.close()

  counts = counter.get_counts()
  assert counts['actor_steps'] > 0 and counts['actor_episodes'] > 0
  assert (tmp_path / 'csv' / 'actor.csv').exists()
