"""R2D2's n-step targets on sequences that run on across episodes: a
truncated LAST step bootstraps from its value, a terminal one does not, and
no window reaches into the next episode."""

import dm_env
import numpy as np
import portpicker
import pytest
import reverb
import tensorflow as tf

from repertory import environments
from repertory.agents import r2d2
from repertory.agents.r2d2 import acting
from repertory.agents.r2d2 import learning
from repertory.components import adders
from repertory.components import losses

_FIRST, _MID, _LAST = (int(dm_env.StepType.FIRST), int(dm_env.StepType.MID),
                       int(dm_env.StepType.LAST))
GAMMA = 0.9


def _returns(rewards, discounts, values, ends, n):
  column = lambda x, dtype=tf.float32: tf.constant(  # pylint: disable=unnecessary-lambda-assignment
      np.asarray(x)[:, None], dtype)
  return learning.episode_n_step_returns(
      column(rewards), column(discounts), column(values),
      column(ends, tf.bool), n).numpy()[:, 0]


@pytest.mark.parametrize('truncated', [True, False])
def test_episode_end_bootstraps_only_at_a_truncation(truncated):
  # x0 x1 x2(LAST) | x3(FIRST) x4: transitions s = 0..3, values V(x_{s+1}).
  r = np.array([1.0, 2.0, 0.0, 4.0])
  end_discount = 1.0 if truncated else 0.0
  d = GAMMA * np.array([1.0, end_discount, 0.0, 1.0])
  v = np.array([10.0, 20.0, 30.0, 40.0])  # V(x1), V(x2), V(x3), V(x4).
  ends = np.array([False, True, False, False])  # x2 is LAST.
  g = _returns(r, d, v, ends, n=3)
  bootstrap = GAMMA**2 * 20.0 if truncated else 0.0
  np.testing.assert_allclose(g[0], 1.0 + GAMMA * 2.0 + bootstrap, rtol=1e-6)
  np.testing.assert_allclose(
      g[1], 2.0 + (GAMMA * 20.0 if truncated else 0.0), rtol=1e-6)
  # The next episode's window ends with the trace: r3 + gamma V(x4).
  np.testing.assert_allclose(g[3], 4.0 + GAMMA * 40.0, rtol=1e-6)


def _value(observation: np.ndarray) -> float:
  """A fixed 'value function' of CartPole observations."""
  return float(np.dot(observation, [1.0, -2.0, 3.0, -4.0]))


def test_returns_on_adder_items_match_a_sequential_reference():
  """CartPole cut at 12 steps (truncations) or ended by falling
  (terminations), written by the real SequenceAdder (CONTINUE) to a real
  Reverb server; the learner's returns on every item equal an n-step walk
  over the raw environment stream."""
  n, length, period = 4, 9, 3
  env = environments.ObservationActionReward(environments.StepLimit(
      environments.make('gym:CartPole-v1', seed=3), 12))
  spec = adders.make_environment_spec(env)
  signature = adders.SequenceAdder.signature(
      spec, length, end_of_episode_behavior=adders.EndBehavior.CONTINUE)
  server = reverb.Server(
      [reverb.Table.queue('seq', 10_000, signature=signature)],
      port=portpicker.pick_unused_port())
  items = []

  def capture(item):
    items.append(item)
    return 1.0

  try:
    client = reverb.Client(f'localhost:{server.port}')
    adder = adders.SequenceAdder(
        client, 'seq', sequence_length=length, period=period,
        end_of_episode_behavior=adders.EndBehavior.CONTINUE,
        priority_fn=capture)
    # raw[x_t] = (r, discount, x_{t+1}, x_{t+1} is LAST), from the env.
    raw = {}
    rng = np.random.RandomState(0)
    timestep = env.reset()
    adder.add_first(timestep)
    num_truncated = num_terminated = 0
    for _ in range(600):
      action = np.int64(rng.randint(2))
      next_timestep = env.step(action)
      raw[timestep.observation.observation.tobytes()] = (
          float(next_timestep.reward), float(next_timestep.discount),
          next_timestep.observation.observation, next_timestep.last())
      adder.add(action, next_timestep)
      if next_timestep.last():
        if next_timestep.discount == 1.0:
          num_truncated += 1
        else:
          num_terminated += 1
        next_timestep = env.reset()
        adder.add_first(next_timestep)
      timestep = next_timestep
    adder.flush()
    adder.close()
  finally:
    server.stop()
  assert num_truncated > 3 and num_terminated > 3, (num_truncated,
                                                    num_terminated)
  assert len(items) > 100
  num_checked = 0
  for item in items:
    obs = np.asarray(item['observation'].observation)  # [L, 4]
    step_type = np.asarray(item['step_type'])
    num_steps = length - 1
    g = _returns(np.asarray(item['reward'])[:-1],
                 GAMMA * np.asarray(item['discount'])[:-1],
                 [_value(o) for o in obs[1:]], step_type[1:] == _LAST, n)
    for s in range(num_steps):
      if step_type[s] == _LAST:
        continue  # No transition leaves a LAST step.
      expected, disc, x = 0.0, 1.0, obs[s]
      for k in range(min(n, num_steps - s)):
        reward, discount, x, x_last = raw[x.tobytes()]
        expected += disc * reward
        disc *= GAMMA * discount
        if x_last:
          break
      expected += disc * _value(x)
      np.testing.assert_allclose(g[s], expected, rtol=1e-5, atol=1e-5)
      num_checked += 1
  assert num_checked > 500


def _item(config, end, num_actions=3, seed=0):
  """A random sequence; end in (None, 'terminal', 'truncated') puts a LAST
  step at index 5, followed by the next episode."""
  rng = np.random.RandomState(seed)
  length = config.sequence_length
  step_type = np.full(length, _MID, np.int32)
  discount = np.ones(length, np.float32)
  reward = rng.randn(length).astype(np.float32)
  if end is not None:
    step_type[5], step_type[6] = _LAST, _FIRST
    discount[5], reward[5] = 0.0, 0.0  # The LAST step holds no transition.
    discount[4] = 0.0 if end == 'terminal' else 1.0
  return {
      'extras': {'q_values': rng.randn(length, num_actions).astype(
          np.float32)},
      'action': rng.randint(num_actions, size=length).astype(np.int32),
      'reward': reward,
      'discount': discount,
      'step_type': step_type,
  }


@pytest.mark.parametrize('end', [None, 'terminal', 'truncated'])
def test_actor_priority_matches_the_learner_loss(end):
  config = r2d2.Config(burn_in=2, trace_length=8, sequence_period=3, n_step=3,
                       discount=0.97)
  item = _item(config, end)
  b = config.burn_in
  q = tf.constant(item['extras']['q_values'][b:, None])  # [T+1, 1, A]
  t = lambda x: tf.constant(x[b:-1, None])  # pylint: disable=unnecessary-lambda-assignment
  step_type = item['step_type'][b:, None]
  td = learning.n_step_double_q_td(
      q[:-1], t(item['action']), t(item['reward']),
      config.discount * t(item['discount']), q[1:], q[1:],
      end_t=tf.constant(step_type[1:] == _LAST), n=config.n_step,
      transform=losses.signed_hyperbolic_transform(config.value_rescaling_eps))
  valid = tf.cast(step_type[:-1] != _LAST, tf.float32)
  expected = losses.r2d2_priority(valid * td.td_error, config.priority_eta)
  actual = acting.R2D2Priority(config)(item)
  np.testing.assert_allclose(actual, float(expected[0]) + 1e-6, rtol=1e-4)
  if end == 'truncated':
    # The truncation changes the targets: the old, cut return differs.
    cut = dict(item, discount=np.where(np.arange(len(item['discount'])) == 4,
                                       0.0, item['discount']).astype(
                                           np.float32))
    assert abs(acting.R2D2Priority(config)(cut) - actual) > 1e-3


def test_learner_td_matches_the_components_loss_without_episode_ends():
  """With no LAST step inside, the windows are the plain n-step ones."""
  rng = np.random.RandomState(1)
  q = tf.constant(rng.randn(7, 2, 3).astype(np.float32))
  a = tf.constant(rng.randint(3, size=(6, 2)))
  r = tf.constant(rng.randn(6, 2).astype(np.float32))
  d = tf.fill([6, 2], 0.99)
  transform = losses.signed_hyperbolic_transform(1e-3)
  ours = learning.n_step_double_q_td(q[:-1], a, r, d, q[1:], q[1:],
                                     tf.zeros([6, 2], tf.bool), 5, transform)
  plain = losses.transformed_n_step_double_q_learning(
      q[:-1], a, r, d, q[1:], q[1:], n=5, transform=transform)
  np.testing.assert_allclose(ours.td_error, plain.td_error, rtol=1e-5)
